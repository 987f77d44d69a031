"""The CPU time a process has used, from /proc: what tells a busy process from a stuck one,
and what the benches charge each daemon; and the whole machine's, by kind of time."""

from __future__ import annotations

import os
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
# The kinds of time of /proc/stat's "cpu" line, in order (guest times follow, counted in user)
USER, NICE, SYSTEM, IDLE, IOWAIT, IRQ, SOFTIRQ, STEAL = range(8)


def cpu_s(pid: int, *, children: bool = False) -> float:
    """utime + stime of a process, in seconds (0 once it is gone); with `children`, also
    what the children it waited for used (a shim's runc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(v) for v in fields[11:15 if children else 13]) / TICK


def machine_ticks() -> list[int]:
    """All cores' time since boot by kind (USER ... STEAL), in clock ticks."""
    return [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
