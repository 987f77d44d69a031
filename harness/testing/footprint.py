"""What a lab's processes are and cost the host, read from /proc: which one a node runs by
name (for tests that stop or watch it), memory and CPU time (for benches)."""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness.instruments.resources import command, memory_mib
from harness.linux import ksm
from harness.linux.cpu import cpu_s

if TYPE_CHECKING:
    from harness.runtime.context import LabContext


def node_process(lab: LabContext, node: str, name: str) -> int:
    """The host pid of the node's process called `name` (its comm), e.g. an engine."""
    for pid in lab.runtime.node_processes(node):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == name:
                return pid
        except OSError:
            continue
    raise LookupError(f"{node} runs no {name}")


@dataclass(frozen=True)
class Footprint:
    """What some nodes of a running lab hold and burn: totals, so callers divide as they
    need (per node, per switch)."""

    processes: int
    rss_mib: float
    pss_mib: float
    cpu_cores: float  # CPU time per wall-clock second over the window: 1.0 is one core
    cpu_by_command: dict[str, float] = field(default_factory=dict)  # the same, per command


def footprint(lab: LabContext, nodes: list[str], window_s: float) -> Footprint:
    """Memory now, and CPU over the next `window_s` seconds, of every process of `nodes`, and
    of the kernel's thread that merges their pages when the lab shares memory."""
    pids = [pid for node in nodes for pid in lab.runtime.node_processes(node)]
    pids += ksm.merging_thread() if lab.plan.share_memory else []
    rss, pss = memory_mib(pids)
    before, start = {pid: cpu_s(pid) for pid in pids}, time.monotonic()
    time.sleep(window_s)
    elapsed = time.monotonic() - start
    by_command: Counter[str] = Counter()
    for pid in pids:
        by_command[command(pid)] += (cpu_s(pid) - before[pid]) / elapsed
    return Footprint(len(pids), rss, pss, sum(by_command.values()),
                     dict(by_command.most_common()))


REAPED = "(reaped children)"
CpuUsed = dict[int, tuple[str, float]]  # pid -> (command, CPU seconds so far)


def cpu_used() -> CpuUsed:
    """The CPU seconds every process on the host has used so far, and (as pid 0, REAPED)
    what this process's children that ended used: a deploy's shell steps, FRR's start before
    its daemons detach, vtysh."""
    used = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            pid = int(entry.name)
            name = command(pid)  # a kernel worker's name ends with what it works on now
            used[pid] = ("kworker" if name.startswith("kworker/") else name, cpu_s(pid))
    times = os.times()
    return {**used, 0: (REAPED, times.children_user + times.children_system)}


def cpu_between(before: CpuUsed, after: CpuUsed) -> Counter[str]:
    """CPU seconds by command from one reading to the next (a process that came and went
    between them, not reaped by this one, is not seen)."""
    spent: Counter[str] = Counter()
    for pid, (name, seconds) in after.items():
        spent[name] += seconds - before.get(pid, (name, 0.0))[1]
    return spent
