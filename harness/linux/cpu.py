"""The CPU time a process has used, from /proc: what tells a busy process from a stuck one,
and what the benches charge each daemon."""

from __future__ import annotations

import os
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int, *, children: bool = False) -> float:
    """utime + stime of a process, in seconds (0 once it is gone); with `children`, also
    what the children it waited for used (a shim's runc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(v) for v in fields[11:15 if children else 13]) / TICK
