"""What the plugin prints beside a failure about the machine (harness/testing/machine.py)."""

from __future__ import annotations

import time

from harness.testing.machine import CpuShare


def test_the_share_between_two_readings_is_their_difference() -> None:
    start, end = CpuShare(10.0, 1.5, 3.0), CpuShare(14.0, 2.0, 5.0)
    assert end.since(start) == CpuShare(4.0, 0.5, 2.0)
    assert "took 0.50 s" in end.since(start).describe()
    assert "during 2.00 s (50% of the time)" in end.since(start).describe()


def test_without_pressure_information_the_wait_is_unknown_not_zero() -> None:
    share = CpuShare(2.0, 0.0, None).since(CpuShare(1.0, 0.0, 0.5))
    assert share.waited_s is None and "waited" not in share.describe()


def test_a_reading_of_this_machine_moves_with_its_clock() -> None:
    start = CpuShare.now()
    time.sleep(0.05)
    share = CpuShare.now().since(start)
    assert share.wall_s >= 0.05 and share.steal_s >= 0
    assert share.waited_s is None or share.waited_s >= 0
