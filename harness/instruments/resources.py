"""What a running lab costs the host, per node and per kind of process, and what the host has
left (`labctl inspect --resources`; the benches' footprints read the same).

Memory is each process's own accounting (/proc/PID/smaps_rollup): RSS, and PSS, which splits
the pages several processes share (FRR's libraries, Python's, KSM's merged pages) among them, so
PSS adds up across a lab where RSS counts a shared page once per process. CPU is utime + stime
over a short window, in cores; the host's from /proc/meminfo and /proc/stat over the same one.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.linux import ksm
from harness.linux.cpu import IDLE, IOWAIT, cpu_s, machine_ticks

if TYPE_CHECKING:
    from harness.runtime.context import LabContext

WINDOW_S = 0.5
KSMD = "ksmd"


def command(pid: int) -> str:
    """What a process is, for a breakdown: its name, or for Python the module it runs."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        name = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"
    if name.startswith("python") and b"-m" in argv[:-1]:
        return argv[argv.index(b"-m") + 1].decode()
    return name


def memory_kib(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of one process in KiB; (0, 0) once it is gone."""
    rss = pss = 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Rss:"):
                rss = int(line.split()[1])
            elif line.startswith("Pss:"):
                pss = int(line.split()[1])
    except OSError:
        return 0, 0
    return rss, pss


def memory_mib(pids: list[int]) -> tuple[float, float]:
    """(RSS, PSS) of these processes together, in MiB."""
    rss, pss = map(sum, zip(*(memory_kib(p) for p in pids), strict=True)) if pids else (0, 0)
    return rss / 1024, pss / 1024


@dataclass
class Cost:
    """What some processes hold and burn: a node's, or every process of one kind."""

    name: str
    processes: int = 0
    rss_mib: float = 0.0
    pss_mib: float = 0.0
    cpu_cores: float = 0.0

    def add(self, rss_kib: int, pss_kib: int, cores: float) -> None:
        self.processes += 1
        self.rss_mib += rss_kib / 1024
        self.pss_mib += pss_kib / 1024
        self.cpu_cores += cores


@dataclass
class Resources:
    nodes: list[Cost]
    kinds: list[Cost]  # by process kind (bgpd, zebra, the agent's module, fl-bfd), lab-wide
    lab: Cost
    host_cores: int
    host_idle_cores: float
    host_mem_total_mib: float
    host_mem_available_mib: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def measure(lab: LabContext, window_s: float = WINDOW_S) -> Resources:
    """Every node's processes (and KSM's thread, when the lab shares memory: it works for the
    lab) over `window_s`."""
    pids = {node: lab.runtime.node_processes(node) for node in lab.node_names}
    if lab.plan.share_memory:
        pids[KSMD] = ksm.merging_thread()
    every = [p for found in pids.values() for p in found]
    cpu_before, ticks_before, started = {p: cpu_s(p) for p in every}, machine_ticks(), \
        time.monotonic()
    time.sleep(window_s)
    elapsed, ticks = time.monotonic() - started, machine_ticks()
    nodes, kinds, total = [], {}, Cost("lab")
    for node, found in pids.items():
        cost = Cost(node)
        for pid in found:
            rss, pss = memory_kib(pid)
            cores = max(0.0, cpu_s(pid) - cpu_before[pid]) / elapsed
            kind = command(pid)
            for into in (cost, kinds.setdefault(kind, Cost(kind)), total):
                into.add(rss, pss, cores)
        nodes.append(cost)
    return Resources(nodes, sorted(kinds.values(), key=lambda c: -c.pss_mib), total,
                     os.cpu_count() or 1, round(idle_cores(ticks_before, ticks), 2),
                     ksm.meminfo_mib("MemTotal"), ksm.mem_available_mib())


def idle_cores(ticks_before: list[int], ticks: list[int]) -> float:
    """The host's idle cores between two readings of /proc/stat's CPU line."""
    spent = [b - a for a, b in zip(ticks_before, ticks, strict=True)]
    return (spent[IDLE] + spent[IOWAIT]) / max(sum(spent), 1) * (os.cpu_count() or 1)
