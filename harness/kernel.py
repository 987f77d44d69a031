"""What this kernel and host can do, found by trying it in a throwaway namespace.

Module lists and config files lie (a module may be built in, or listed but unloadable), so
each feature is probed by doing the real thing once: adding a netem qdisc, a VRF device, a
seg6 route. Results are cached per process. Fallbacks elsewhere read from here and say so.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import FrameType

from harness.linux.scratch import scratch_netns
from harness.topology.plan import LabPlan

# feature -> commands run in the probe namespace; the feature exists if all succeed.
_PROBES: dict[str, list[list[str]]] = {
    "netem": [["tc", "qdisc", "add", "dev", "probe0", "root", "netem", "delay", "1ms"]],
    "htb": [["tc", "qdisc", "add", "dev", "probe0", "root", "handle", "1:", "htb"]],
    "tbf": [["tc", "qdisc", "add", "dev", "probe0", "root", "tbf", "rate", "1mbit",
             "burst", "32kbit", "latency", "50ms"]],
    "tc_redirect": [["tc", "qdisc", "add", "dev", "probe0", "clsact"],
                    ["tc", "filter", "add", "dev", "probe0", "egress", "protocol", "all", "u32",
                     "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev",
                     "probe1"]],
    "fq": [["tc", "qdisc", "add", "dev", "probe0", "root", "fq"]],
    "fq_codel": [["tc", "qdisc", "add", "dev", "probe0", "root", "fq_codel"]],
    "vrf": [["ip", "link", "add", "probevrf", "type", "vrf", "table", "10"]],
    "openvswitch": [["ip", "link", "add", "probeovs", "type", "openvswitch"]],
    "mpls": [["sysctl", "-w", "net.mpls.platform_labels=16"]],
    "vxlan": [["ip", "link", "add", "probevx", "type", "vxlan", "id", "42", "dstport", "4789"]],
    "seg6": [["ip", "-6", "route", "add", "fc00:1::/64", "encap", "seg6", "mode", "encap",
              "segs", "fc00:2::1", "dev", "probe0"]],
    "seg6local": [["ip", "-6", "route", "add", "fc00:3::1/128", "encap", "seg6local",
                   "action", "End", "dev", "probe0"]],
    "nexthop_groups": [["ip", "nexthop", "add", "id", "1", "dev", "probe0"],
                       ["ip", "nexthop", "add", "id", "2", "group", "1"]],
    "nfqueue": [["iptables", "-A", "INPUT", "-j", "NFQUEUE", "--queue-num", "0",
                 "--queue-bypass"]],
}
_SETUP = [["ip", "link", "add", "probe0", "type", "veth", "peer", "name", "probe1"],
          ["ip", "link", "set", "probe0", "up"],
          ["ip", "link", "set", "probe1", "up"],
          ["ip", "-6", "addr", "add", "fc00::1/64", "dev", "probe0"]]


@dataclass(frozen=True)
class Feature:
    name: str
    available: bool
    detail: str


def _in_probe(netns: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", netns, *argv], capture_output=True,
                          text=True, timeout=10)


def _probe(name: str) -> Feature:
    with scratch_netns(f"probe-{name}") as netns:
        for argv in _SETUP:
            _in_probe(netns, argv)
        for argv in _PROBES[name]:
            out = _in_probe(netns, argv)
            if out.returncode != 0:
                return Feature(name, False, (out.stderr or out.stdout).strip().splitlines()[0]
                               if (out.stderr or out.stdout).strip() else f"exit {out.returncode}")
        return Feature(name, True, "works")


@cache
def feature(name: str) -> Feature:
    return _probe(name)


def features() -> list[Feature]:
    return [feature(name) for name in _PROBES]


def has(name: str) -> bool:
    return feature(name).available


@dataclass(frozen=True)
class Tool:
    name: str
    path: str | None
    version: str


_TOOLS = {
    "frr": (["/usr/lib/frr/zebra", "--version"], "/usr/lib/frr/zebra"),
    "docker": (["docker", "--version"], "docker"),
    "mininet": (["/usr/bin/python3", "-c", "import mininet.net as m; print(m.VERSION)"], "mn"),
    "tcpdump": (["tcpdump", "--version"], "tcpdump"),
    "iperf3": (["iperf3", "--version"], "iperf3"),
    "nft": (["nft", "--version"], "nft"),
}


def tools() -> list[Tool]:
    found = []
    for name, (argv, binary) in _TOOLS.items():
        path = shutil.which(binary)
        version = ""
        if path:
            try:
                out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
                text = (out.stdout or out.stderr).strip()
                version = text.splitlines()[0] if text else ""
            except (OSError, subprocess.TimeoutExpired):
                version = "(does not run)"
        found.append(Tool(name, path, version))
    return found


@dataclass(frozen=True)
class NeighbourTable:
    """One of the kernel's neighbour tables (ARP, IPv6 ND): one for the whole host, shared by
    every namespace and container, with a hard limit (gc_thresh3, 1024 by default). Past it
    the kernel refuses new neighbours (`sendmsg: No buffer space available`), and the sessions
    that need them never come up."""

    afi: str
    sysctl: str  # net.<family>.neigh.default
    limits: Path  # that sysctl's directory
    stats: Path  # the kernel's counters; the first field is the entries in use, in hex

    def limit(self) -> int:
        return int((self.limits / "gc_thresh3").read_text())

    def in_use(self) -> int:
        return int(self.stats.read_text().splitlines()[1].split()[0], 16)

    def need(self, plan: LabPlan) -> int:
        return NEIGHBOURS_PER_SESSION_END * len(plan.sessions)  # each carries both families

    def settings(self, limit: int) -> dict[str, int]:
        """The thresholds that give the table room for `limit` entries (the kernel starts
        collecting at a quarter and a half of it)."""
        return {"gc_thresh3": limit, "gc_thresh2": limit // 2, "gc_thresh1": limit // 4}


def _table(afi: str, stats: str) -> NeighbourTable:
    sysctl = f"net.{afi}.neigh.default"
    return NeighbourTable(afi, sysctl, Path("/proc/sys", *sysctl.split(".")),
                          Path("/proc/net/stat", stats))


NEIGHBOUR_TABLES = (_table("ipv4", "arp_cache"), _table("ipv6", "ndisc_cache"))
# Measured at an idle fpf-64 when it ran a session per family: its 1152 IPv4 session ends held
# 1212 ARP entries, its 1152 IPv6 ones 1320-1858 ND entries (global and link-local addresses).
NEIGHBOURS_PER_SESSION_END = 2


def neighbour_room(plan: LabPlan) -> str | None:
    """Why the host's neighbour tables cannot hold a lab's neighbours, or None: a lab must not
    start where it does not fit."""
    short, fixes = [], []
    for table in NEIGHBOUR_TABLES:
        need, limit, in_use = table.need(plan), table.limit(), table.in_use()
        if in_use + need <= limit:
            continue
        short.append(f"about {need} {table.afi} neighbour entries and this host has room for "
                     f"{max(0, limit - in_use)} ({table.sysctl}.gc_thresh3 = {limit}, "
                     f"{in_use} in use)")
        fixes += [f"{table.sysctl}.{key}={value}" for key, value
                  in table.settings(1 << (in_use + need).bit_length()).items()]
    if not short:
        return None
    return (f"the lab needs {' and '.join(short)}; the limits are shared by every namespace, "
            "and sessions whose neighbours do not fit would stay down. Raise them: "
            f"sysctl -w {' '.join(fixes)}")


@contextlib.contextmanager
def neighbour_limit_raised(plan: LabPlan) -> Iterator[None]:
    """For a bench's run only: raise the host's neighbour limits so the lab fits, and put the
    old values back (a lab deployed by hand gets the sysctl to run instead), also when the
    bench is stopped with SIGTERM (`timeout`, kill), which would otherwise skip `finally`."""
    keys = ("gc_thresh1", "gc_thresh2", "gc_thresh3")
    old = {table: {key: (table.limits / key).read_text().strip() for key in keys}
           for table in NEIGHBOUR_TABLES}
    on_sigterm = signal.signal(signal.SIGTERM, _unwind)
    try:
        for table in NEIGHBOUR_TABLES:
            need = 4 * table.need(plan)
            if table.limit() < need:
                print(f"raising {table.sysctl}.gc_thresh3 {table.limit()} -> {need} for the run")
                for key, value in table.settings(need).items():
                    (table.limits / key).write_text(str(value))
        yield
    finally:
        for table, values in old.items():
            for key, value in values.items():
                (table.limits / key).write_text(value)
        signal.signal(signal.SIGTERM, on_sigterm)


def _unwind(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # as Ctrl-C: a deploy rolls back, every `finally` runs
