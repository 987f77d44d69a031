"""The benches' CPU breakdown: each process is charged what it used between two readings,
under its command, and a child that ran and ended in between still counts (as reaped)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from harness.instruments.resources import command
from harness.testing.footprint import REAPED, cpu_between, cpu_used

BURN = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"


def test_each_process_is_charged_its_own_time_under_its_command() -> None:
    before = {10: ("bgpd", 5.0), 11: ("bgpd", 1.0), 12: ("zebra", 3.0), 13: ("gone", 9.0)}
    after = {10: ("bgpd", 6.5), 11: ("bgpd", 1.5), 12: ("zebra", 3.0), 14: ("zebra", 0.25)}
    assert cpu_between(before, after) == {"bgpd": 2.0, "zebra": 0.25}


def test_a_child_that_ended_is_counted_as_reaped() -> None:
    before, start = cpu_used(), time.monotonic()
    subprocess.run([sys.executable, "-c", BURN], check=True)
    spent = cpu_between(before, cpu_used())
    tick = 1 / os.sysconf("SC_CLK_TCK")  # user and system time apiece, in clock ticks
    assert 0.3 - 2 * tick <= spent[REAPED] <= time.monotonic() - start + tick


def test_a_running_process_is_charged_under_its_command() -> None:
    before = cpu_used()
    end = time.process_time() + 0.1
    while time.process_time() < end:
        pass
    after = cpu_used()
    assert after[os.getpid()][0] == command(os.getpid())
    # /proc gives user and system time apiece in whole clock ticks, each cut down to one:
    # 0.1 s of it may read two ticks short (seen: 4.83 - 4.73, 0.82 - 0.73)
    ticks = os.sysconf("SC_CLK_TCK")
    used = round((after[os.getpid()][1] - before[os.getpid()][1]) * ticks)
    assert used >= round(0.1 * ticks) - 2
