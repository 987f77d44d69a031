"""What this kernel and host can do, found by trying it in a throwaway namespace.

Module lists and config files lie (a module may be built in, or listed but unloadable), so
each feature is probed by doing the real thing once: adding a netem qdisc, a VRF device, a
seg6 route. Results are cached per process. Fallbacks elsewhere read from here and say so.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from functools import cache

from harness.runtime.scratch import scratch_netns

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
