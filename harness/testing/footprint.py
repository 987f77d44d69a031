"""What a lab's processes cost the host, read from /proc: memory and CPU time, for benches."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.deploy.context import LabContext

TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """utime + stime of a process, in seconds (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def memory_mib(pids: list[int]) -> tuple[float, float]:
    """(RSS, PSS) of these processes together, in MiB; PSS splits shared pages (FRR's
    libraries, Python's) among the processes that map them."""
    rss = pss = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1])
        except OSError:
            continue
    return rss / 1024, pss / 1024


@dataclass(frozen=True)
class Footprint:
    """What some nodes of a running lab hold and burn: totals, so callers divide as they
    need (per node, per switch)."""

    processes: int
    rss_mib: float
    pss_mib: float
    cpu_cores: float  # CPU time per wall-clock second over the window: 1.0 is one core


def footprint(lab: LabContext, nodes: list[str], window_s: float) -> Footprint:
    """Memory now, and CPU over the next `window_s` seconds, of every process of `nodes`."""
    pids = [pid for node in nodes for pid in lab.runtime.node_processes(node)]
    rss, pss = memory_mib(pids)
    before, start = sum(map(cpu_s, pids)), time.monotonic()
    time.sleep(window_s)
    cpu = (sum(map(cpu_s, pids)) - before) / (time.monotonic() - start)
    return Footprint(len(pids), rss, pss, cpu)
