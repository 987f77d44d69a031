"""The probe schedule a lab gets, and the engine's verdict lines as the agent reads them."""

from __future__ import annotations

from harness.fabrics.fpf import FpfParams, plan
from harness.spray.nic import probe_timing
from harness.spray.probe import Verdict, parse
from harness.spray.schedule import MIN_WINDOW
from harness.topology.augment import augment
from harness.topology.loader import load_text

FPF_MINI = FpfParams(planes=8, leaves_per_plane=2, spines_per_plane=1, hosts=4)


def test_a_small_fabric_probes_as_configured() -> None:
    schedule = probe_timing(plan(FPF_MINI))
    assert schedule is not None and not schedule.stretched
    assert (schedule.interval_us, schedule.misses, schedule.window, schedule.drain) == \
        (5000, 3, 200, 5)  # 2.5% of a 1 s window
    assert schedule.detect_ms == 20.0 and not schedule.off


def test_a_bigger_fabric_probes_less_often_to_stay_within_the_budget() -> None:
    lab = plan(FpfParams(planes=8, leaves_per_plane=2, spines_per_plane=1, hosts=8))
    schedule = probe_timing(lab)
    assert schedule is not None and schedule.stretched and not schedule.off
    assert lab.probes is not None
    assert 8 * 7 * 8 * 1e6 / schedule.interval_us <= lab.probes.budget_pps
    assert "not every 5 ms: 8 hosts" in schedule.describe(8)


def test_probes_slower_than_bfd_do_not_run() -> None:
    """fpf-64 within the budget would probe every 1.6 s: BFD finds a dead plane first."""
    lab = plan(FpfParams(planes=8, leaves_per_plane=4, spines_per_plane=2, hosts=64))
    schedule = probe_timing(lab)
    assert schedule is not None and schedule.off
    assert schedule.window == MIN_WINDOW and schedule.drain >= 2
    assert "spray probes off" in schedule.describe(64)


def test_probes_can_be_turned_off() -> None:
    source = """name: off
spray: {probes: null}
topology:
  nodes:
    host1: {role: host}
    p0-leaf1: {role: leaf, plane: 0, kind: sai}
    p1-leaf1: {role: leaf, plane: 1, kind: sai}
  links:
  - endpoints: [host1:eth1, p0-leaf1:eth1]
  - endpoints: [host1:eth2, p1-leaf1:eth1]
"""
    assert probe_timing(augment(load_text(source, "off.yml"))) is None


def test_verdict_lines() -> None:
    assert parse("10.0.0.27 3 drain silent") == Verdict("10.0.0.27", 3, "silent")
    assert parse("10.0.0.27 6 drain loss") == Verdict("10.0.0.27", 6, "loss")
    assert parse("10.0.0.27 6 restore") == Verdict("10.0.0.27", 6, None)
