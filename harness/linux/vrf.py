"""The VRF strict mode, per namespace: on, the kernel finds a VRF device by its table, which
seg6local's End.DT4 and End.DT46 need (their only form is `vrftable`). The key exists once the
vrf module is loaded; a container's /proc/sys is read-only, so its runtime sets it at
creation and the agent inside only finds it on."""

from __future__ import annotations

from harness.linux.nsenter import write_sysctls

VRF_STRICT = "net.vrf.strict_mode"


def strict_mode(netns_path: str | None) -> None:
    """Turn the strict mode on in the namespace (None: this thread's), unless it is on."""
    write_sysctls(netns_path, {VRF_STRICT: "1"})
