"""A spine crash inside one plane of an FPF with two spines per plane: the plane heals itself
(its leaves move to the other spine), so hosts keep spraying on all 8 planes."""

from __future__ import annotations

import pytest

from harness.fabrics.fpf import FpfParams, plan, plane_nic, spine_name
from harness.spray.nic import planes_to_hosts

pytestmark = pytest.mark.e2e

PLANE = 4
PORT = 7100
RECOVERY_BOUND_MS = 600  # BFD 300 ms detection + BGP/zebra reaction on a loaded 2-core box


@pytest.fixture(scope="module")
def topology():
    return plan(FpfParams(planes=8, leaves_per_plane=2, spines_per_plane=2, hosts=4,
                          name="fpf-e2e-2s"))


def spine_carrying(lab, src: str, dst: str, plane: int) -> str:
    """The spine the leaf's ECMP hash picks for this flow's 5-tuple (policy: L4 hash)."""
    nic = next(i for i in lab.plan.node(src).interfaces if i.name == plane_nic(plane))
    leaf = lab.plan.node(nic.peer.node)
    out = lab.node(leaf.name).cmd(
        "ip", "route", "get", lab.plan.node(dst).loopback4, "from",
        lab.plan.node(src).loopback4, "iif", nic.peer.iface, "ipproto", "udp",
        "sport", str(PORT), "dport", str(PORT), check=True).stdout
    uplink = out.split(" dev ")[1].split()[0]
    return next(i.peer.node for i in leaf.interfaces if i.name == uplink)


def test_spine_crash_heals_inside_the_plane(lab, faults, traffic):
    spine = spine_carrying(lab, "host1", "host3", PLANE)
    assert spine in {spine_name(PLANE, 0), spine_name(PLANE, 1)}
    result = traffic.flow("host1", "host3", count=8_000, rate_pps=2000, port=PORT, sport=PORT,
                          actions=[(1.0, f"crash {spine}", lambda: faults.node_crash(spine))])
    assert result.lost > 0, "the flow did not cross the crashed spine"
    assert result.outage_ms < RECOVERY_BOUND_MS, result
    assert result.per_plane_after_outage.get(PLANE, 0) > 0  # plane 4 carries traffic again
    assert planes_to_hosts(lab, "host1")["host3"] == set(range(8))
