"""The VRF strict mode, per namespace: on, the kernel finds a VRF device by its table, which
seg6local's End.DT4 and End.DT46 need (their only form is `vrftable`). The key exists once the
vrf module is loaded; a container's /proc/sys is read-only, so its runtime sets it at
creation and this only checks it."""

from __future__ import annotations

from pathlib import Path

from harness.linux.nsenter import call_in_netns

VRF_STRICT = "net.vrf.strict_mode"


def strict_mode(netns_path: str | None) -> None:
    """Turn the strict mode on in the namespace (None: this thread's), unless it is on."""
    def here() -> None:
        key = Path("/proc/sys", *VRF_STRICT.split("."))
        if key.read_text().strip() != "1":
            key.write_text("1")
    if netns_path:
        call_in_netns(netns_path, here)
    else:
        here()
