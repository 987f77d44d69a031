"""A BAG lab and an RBB lab joined into one (`labctl gen rbb --join`): bag-mini's regions are
the backbone's campuses, their BAG switches its campus edges (r1's on bb1, r2's on bb3), and
the cloud edge hangs off bb2. The backbone learns the regions' hosts and the BAG switches the
backbone's locators over BGP, and a policy headed at bb2 carries the cloud's traffic for a
host of region r2 the long way round the ring (bb1, bb4, bb3) into that region.
"""

from __future__ import annotations

import pytest

from harness.fabrics.rbb import RbbParams, generate
from harness.testing import plan_from
from harness.testing.capture import capture, towards
from harness.topology.augment import augment
from harness.topology.loader import dump_yaml, load_text
from tests.conftest import TOPOLOGIES

pytestmark = pytest.mark.e2e
TARGET = "r2b1-host1"


@pytest.fixture(scope="module")
def topology(tmp_path_factory):
    joined = generate(RbbParams(routers=4, campuses=2, name="bag-rbb-e2e",
                                join=str(TOPOLOGIES / "bag-mini.yml")))
    source = tmp_path_factory.mktemp("bag-rbb") / "bag-rbb.yml"
    target = augment(load_text(dump_yaml(joined), str(source))).node(TARGET)
    joined["srv6"]["policies"] = [{"name": "to-r2", "headend": "bb2",
                                   "destination": f"{target.loopback6}/128",
                                   "path": ["bb1", "bb4", "bb3"]}]
    source.write_text(dump_yaml(joined))
    return plan_from(source)


def test_the_backbone_and_the_regions_learn_each_other(lab) -> None:
    host = lab.plan.node(TARGET)
    assert host.loopback6 in lab.frr("bb1").vtysh(f"show ipv6 route {host.loopback6}")
    for bag in ("r1-bag1", "r2-bag2"):
        assert "fcbb:bbbb:2::/48" in lab.frr(bag).vtysh("show ipv6 route fcbb:bbbb:2::/48")


def test_a_policy_carries_the_clouds_traffic_into_a_region_the_long_way(lab) -> None:
    cloud, host = lab.plan.node("cloud-host1"), lab.plan.node(TARGET)

    def port(node: str, peer: str) -> str:
        return next(i.name for i in lab.plan.node(node).interfaces if i.peer.node == peer)
    on_path, shortest = ("bb1", port("bb1", "bb2")), ("bb3", port("bb3", "bb2"))
    with capture(lab, [on_path, shortest]) as seen:
        out = lab.node("cloud-host1").cmd("ping", "-6", "-c", "3", "-i", "0.2", "-I",
                                          cloud.loopback6, host.loopback6)
    assert out.returncode == 0, out.stdout
    assert len(towards(seen[on_path], host.loopback6)) == 3, seen[on_path]
    assert towards(seen[shortest], host.loopback6) == []
