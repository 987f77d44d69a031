"""FPF on fpf-mini with real FRR: per-packet spraying over 8 planes and host-steered failover.

Hosts 1-2 sit on leaf1 and hosts 3-4 on leaf2 of every plane, so host1 -> host3 crosses a
spine in each plane while host3 -> host4 stays below leaf2.
"""

from __future__ import annotations

import pytest

from harness.nodes.bfd.offload import tick_ms
from harness.spray.control import planes_to_hosts, read_spray, spray_status, wait_spray
from harness.testing import plan_from
from harness.testing.load import WakeupLateness

pytestmark = pytest.mark.e2e

PLANES = set(range(8))
RATE = 2000
INTERVAL_MS = 1000 / RATE


@pytest.fixture(scope="module")
def topology():
    return plan_from("topologies/fpf-mini.yml", name="fpf-e2e")


def test_single_flow_is_sprayed_evenly_over_all_planes(lab, traffic):
    result = traffic.flow("host1", "host3", count=10_000, rate_pps=RATE)
    assert result.lost == 0, result
    assert set(result.per_plane) == PLANES
    even = result.received / len(PLANES)
    for plane, count in result.per_plane.items():
        assert abs(count - even) <= 0.05 * even, f"plane {plane}: {count} of {result.received}"


def test_plane_down_keeps_the_flow_on_the_other_planes(lab, faults, traffic):
    """Bounded by the mechanism: BFD declares the plane down within its detect time (plus the
    BFD offload's tick, and how late this box wakes a sleeper while the flow runs), and the
    flow heals the moment the host's agent switches nftables (plus one packet interval and
    the packets in flight)."""
    with WakeupLateness() as load:
        result = traffic.flow("host1", "host3", count=8_000, rate_pps=RATE,
                              actions=[(1.0, "plane 3 down", lambda: faults.plane_down(3))])
    assert 0 < result.lost < result.sent / 8, result  # only plane 3's share, only briefly
    assert set(result.per_plane_after_outage) == PLANES - {3}
    assert planes_to_hosts(lab, "host1")["host3"] == PLANES - {3}
    assert spray_status(lab, lab.plan.node("host1"))["planes"] == \
        "7/8 active: 0-2,4-7; plane 3 out: BFD down"
    fault_ns = faults.history[-1].injected_ns
    view = read_spray(lab, "host1")
    assert view is not None
    event_ns, switched_ns = view.switched_ns[lab.plan.node("host3").loopback4]
    detected_ms, switched_ms = (event_ns - fault_ns) / 1e6, (switched_ns - fault_ns) / 1e6
    bfd = lab.plan.bfd
    detect_ms = bfd.interval_ms * bfd.multiplier + (tick_ms(bfd) if bfd.offload else 0)
    where = f"{result}; event {detected_ms:.1f} ms, switch {switched_ms:.1f} ms, " \
            f"wake-up lateness {load.max_ms:.1f} ms over {load.samples} samples"
    assert 0 < detected_ms <= detect_ms + load.max_ms, where
    assert result.outage_ms <= switched_ms + INTERVAL_MS + result.latency_us["max"] / 1000, where


def test_plane_up_brings_the_flow_back_to_all_planes(lab, faults, traffic):
    faults.plane_down(5)
    wait_spray(lab, {("host1", "host3"): PLANES - {5}}, timeout=10)
    result = traffic.flow("host1", "host3", count=8_000, rate_pps=RATE,
                          actions=[(0.5, "plane 5 up", lambda: faults.plane_up(5))])
    wait_spray(lab, {("host1", "host3"): PLANES}, timeout=30)
    late = traffic.flow("host1", "host3", count=2_000, rate_pps=RATE)
    assert late.lost == 0 and set(late.per_plane) == PLANES, late
    assert result.per_plane[5] > 0  # plane 5 rejoined while the flow was running


def test_leaf_uplink_failure_only_affects_paths_through_it(lab, faults, traffic):
    faults.link_down("p2-leaf1--p2-spine1")
    crossing = PLANES - {2}
    wait_spray(lab, {("host1", "host3"): crossing, ("host3", "host1"): crossing,
                     ("host1", "host2"): PLANES, ("host3", "host4"): PLANES}, timeout=10)
    below_leaf = traffic.flow("host3", "host4", count=4_000, rate_pps=RATE)
    across = traffic.flow("host1", "host3", count=4_000, rate_pps=RATE)
    assert below_leaf.lost == 0 and set(below_leaf.per_plane) == PLANES, below_leaf
    assert across.lost == 0 and set(across.per_plane) == crossing, across
    assert spray_status(lab, lab.plan.node("host1"))["planes"] == \
        "7/8 active: 0-1,3-7; plane 2 to 1/3 hosts: route gone"
