"""What this kernel and host can do, found by trying it in a throwaway namespace.

Module lists and config files lie (a module may be built in, or listed but unloadable), so
each feature is probed by doing the real thing once: adding a netem qdisc, a VRF device, a
seg6 route. Results are cached per process. Fallbacks elsewhere read from here and say so.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from harness.runtime.scratch import scratch_netns
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


ND_LIMITS = Path("/proc/sys/net/ipv6/neigh/default")
ND_CACHE_STATS = Path("/proc/net/stat/ndisc_cache")
ND_PER_SESSION = 2  # measured: fpf-64's 1152 IPv6 session ends hold 1320 neighbours


def ipv6_session_ends(plan: LabPlan) -> int:
    return sum(s.afi == "ipv6" for s in plan.sessions)


def neighbour_room(plan: LabPlan) -> str | None:
    """Why the kernel's IPv6 neighbour table cannot hold a lab's neighbours, or None.

    The table's hard limit (gc_thresh3, 1024 by default) is one for the whole host, shared by
    every namespace and container; past it the kernel refuses new neighbours and the IPv6
    sessions that need them never come up, so a lab must not start where it does not fit.
    """
    ends = ipv6_session_ends(plan)
    need = ND_PER_SESSION * ends
    limit = int((ND_LIMITS / "gc_thresh3").read_text())
    in_use = int(ND_CACHE_STATS.read_text().splitlines()[1].split()[0], 16)
    if in_use + need <= limit:
        return None
    wanted = 1 << (in_use + need).bit_length()
    return (f"the lab needs about {need} IPv6 neighbour entries ({ends} IPv6 "
            f"session ends) and this host has room for {max(0, limit - in_use)} "
            f"(net.ipv6.neigh.default.gc_thresh3 = {limit}, shared by every namespace; "
            f"{in_use} in use): its IPv6 sessions would stay down. Raise the limit: sysctl -w "
            f"net.ipv6.neigh.default.gc_thresh3={wanted} "
            f"net.ipv6.neigh.default.gc_thresh2={wanted // 2} "
            f"net.ipv6.neigh.default.gc_thresh1={wanted // 4}")


@contextlib.contextmanager
def neighbour_limit_raised(plan: LabPlan) -> Iterator[None]:
    """For a bench's run only: raise the host's IPv6 neighbour limits so the lab fits, and put
    the old values back (a lab deployed by hand gets the sysctl to run instead)."""
    keys = ("gc_thresh1", "gc_thresh2", "gc_thresh3")
    old = {key: (ND_LIMITS / key).read_text().strip() for key in keys}
    need = 4 * ND_PER_SESSION * ipv6_session_ends(plan)
    if int(old["gc_thresh3"]) >= need:
        yield
        return
    print(f"raising net.ipv6.neigh.default.gc_thresh3 {old['gc_thresh3']} -> {need} for the run")
    for key, value in zip(keys, (need // 4, need // 2, need), strict=True):
        (ND_LIMITS / key).write_text(str(value))
    try:
        yield
    finally:
        for key, value in old.items():
            (ND_LIMITS / key).write_text(value)
