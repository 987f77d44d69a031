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
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import FrameType

from harness.linux import hostwide
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
    # tc's classic BPF filter (here: match all) and mirred: how port engines take frames
    "cls_bpf_redirect": [["tc", "qdisc", "add", "dev", "probe0", "clsact"],
                         ["tc", "filter", "add", "dev", "probe0", "egress", "protocol", "all",
                          "bpf", "bytecode", "1,6 0 0 4294967295", "action", "mirred",
                          "egress", "redirect", "dev", "probe1"]],
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


_PROBING = threading.Lock()


def feature(name: str) -> Feature:
    """Probed once per process, however many threads ask at once (docker creates its nodes
    eight at a time: their first asks raced for the same scratch namespace)."""
    with _PROBING:
        return _probed(name)


@cache
def _probed(name: str) -> Feature:
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
# bench/scale.py --hosts 64: an idle fpf-64 (1152 session ends over IPv4) held 1150 ARP
# entries and no ND ones; two per session end leaves room for ND once IPv6 traffic flows.
NEIGHBOURS_PER_SESSION_END = 2


def _room_needed(table: NeighbourTable, plan: LabPlan) -> int | None:
    """The limit that gives the lab room in `table` (a power of two above what the host holds
    now plus what the lab needs), or None when it fits already."""
    want = table.in_use() + table.need(plan)
    return None if want <= table.limit() else 1 << want.bit_length()


def neighbour_room(plan: LabPlan) -> str | None:
    """Why the host's neighbour tables cannot hold a lab's neighbours, or None: a lab must not
    start where it does not fit."""
    short, fixes = [], []
    for table in NEIGHBOUR_TABLES:
        limit = _room_needed(table, plan)
        if limit is None:
            continue
        in_use = table.in_use()
        short.append(f"about {table.need(plan)} {table.afi} neighbour entries and this host has "
                     f"room for {max(0, table.limit() - in_use)} ({table.sysctl}.gc_thresh3 = "
                     f"{table.limit()}, {in_use} in use)")
        fixes += [f"{table.sysctl}.{key}={value}"
                  for key, value in table.settings(limit).items()]
    if not short:
        return None
    return (f"the lab needs {' and '.join(short)}; the limits are shared by every namespace, "
            "and sessions whose neighbours do not fit would stay down. Deploy with "
            "--raise-neighbour-limits (the host's values come back when the last lab that "
            f"raised them is destroyed), or raise them yourself: sysctl -w {' '.join(fixes)}")


def neighbour_setting() -> hostwide.Setting:
    """Both tables' thresholds, as one host-wide setting (linux/hostwide.py)."""
    keys = ("gc_thresh1", "gc_thresh2", "gc_thresh3")

    def read() -> dict[str, object]:
        return {t.sysctl: {key: (t.limits / key).read_text().strip() for key in keys}
                for t in NEIGHBOUR_TABLES}

    def write(host: dict[str, object]) -> None:
        for table in NEIGHBOUR_TABLES:
            for key, value in host[table.sysctl].items():  # type: ignore[attr-defined]
                (table.limits / key).write_text(str(value))
    return hostwide.Setting("neighbour-limits", read, write)


def hold_neighbour_limits(plan: LabPlan, holder: str,
                          where: Path = hostwide.HOST_DIR) -> list[str]:
    """Raise the host's neighbour limits so `plan` fits, held by `holder` (a lab directory)
    until `release_neighbour_limits`; returns what was raised, one line a threshold."""
    raised: list[str] = []

    def change() -> None:
        for table in NEIGHBOUR_TABLES:
            limit = _room_needed(table, plan)
            if limit is None:
                continue
            for key, value in table.settings(limit).items():
                old = (table.limits / key).read_text().strip()
                (table.limits / key).write_text(str(value))
                raised.append(f"{table.sysctl}.{key} {old} -> {value}")
    hostwide.hold(neighbour_setting(), holder, change, where)
    return raised


def release_neighbour_limits(holder: str | None, where: Path = hostwide.HOST_DIR) -> bool:
    """`holder` no longer needs them (None: sweep holders whose lab is gone); the host's values
    come back with the last one."""
    return hostwide.release(neighbour_setting(), holder, lambda h: Path(h).is_dir(), where)


@contextlib.contextmanager
def neighbour_limit_raised(plan: LabPlan, holder: str,
                           where: Path = hostwide.HOST_DIR) -> Iterator[None]:
    """For a bench's run: the limits raised as `deploy --raise-neighbour-limits` raises them,
    put back at the end, also when the bench is stopped with SIGTERM (`timeout`, kill),
    which would otherwise skip `finally`."""
    on_sigterm = signal.signal(signal.SIGTERM, _unwind)
    try:
        for line in hold_neighbour_limits(plan, holder, where):
            print(f"raising {line} for the run")
        yield
    finally:
        release_neighbour_limits(holder, where)
        signal.signal(signal.SIGTERM, on_sigterm)


def _unwind(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # as Ctrl-C: a deploy rolls back, every `finally` runs
