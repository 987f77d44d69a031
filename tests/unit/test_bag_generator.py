"""The BAG generator (harness/fabrics/bag.py) and the shipped bag-mini.yml, without root."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from harness.fabrics.bag import FABRIC, BagParameterError, BagParams, check
from harness.fabrics.base import render
from harness.topology.augment import augment
from harness.topology.fibre import one_way_delay_us
from harness.topology.loader import load_text
from harness.topology.pipeline import plan_from_file
from harness.topology.plan import LabPlan
from harness.topology.reachability import reachable_origins
from harness.topology.schema import Role
from tests.conftest import TOPOLOGIES, regenerated


@pytest.fixture(scope="module")
def mini() -> LabPlan:
    return plan_from_file(TOPOLOGIES / "bag-mini.yml")


def test_the_shipped_file_is_what_its_generated_by_command_writes(tmp_path: Path) -> None:
    shipped, generated = regenerated("bag-mini.yml", tmp_path)
    assert generated == shipped


def test_every_node_stands_in_a_region_and_all_but_bag_in_a_building(mini: LabPlan) -> None:
    for node in mini.nodes:
        assert node.region in ("r1", "r2"), node.name
        assert (node.building is None) == (node.role is Role.bag), node.name
        if node.building:
            assert node.building.startswith(node.region) and node.name.startswith(node.building)


def test_every_host_reaches_every_host_across_buildings_and_regions(mini: LabPlan) -> None:
    reach = reachable_origins(mini)
    hosts = {n.name for n in mini.nodes if n.role is Role.host}
    assert len(hosts) == 8
    for host in hosts:
        assert hosts - {host} <= reach[host], (host, hosts - reach[host])


def test_bundles_and_distances(mini: LabPlan) -> None:
    """Each building's spine to each BAG of its region, and each BAG to each BAG of the other
    region: two links each (a session each); the first building stands on the BAG's campus
    (2 km), the second 40 km away; regions are 400 km apart, delay from the fibre."""
    pairs = Counter(tuple(sorted((link.a.node, link.b.node))) for link in mini.links
                    if link.distance_km)
    assert set(pairs.values()) == {2}
    assert len(pairs) == 4 * 2 + 2 * 2  # spine-BAG pairs, then BAG-BAG pairs
    km = {pair: link.distance_km for link in mini.links if link.distance_km
          for pair in [tuple(sorted((link.a.node, link.b.node)))]}
    assert km[("r1-bag1", "r1b1-spine1")] == 2 and km[("r1-bag1", "r1b2-spine1")] == 40
    assert km[("r1-bag1", "r2-bag2")] == 400
    long_haul = next(link for link in mini.links if link.distance_km == 400)
    assert long_haul.impairment.delay_us == pytest.approx(one_way_delay_us(400))
    assert sum(1 for s in mini.sessions if {s.node, s.peer} == {"r1-bag1", "r2-bag1"}) == 4


def test_nsf_buildings_have_a_third_tier_facing_the_bag() -> None:
    plan = augment(load_text(render(FABRIC, BagParams(
        regions=1, buildings_per_region=2, fabric="nsf", spines_per_building=2))))
    tops = {n.name for n in plan.nodes if n.role is Role.superspine}
    assert tops == {f"r1b{b}-superspine{i}" for b in (1, 2) for i in (1, 2)}
    to_bag = {end.node for link in plan.links if "bag" in link.b.node for end in (link.a,)}
    assert to_bag == tops
    reach = reachable_origins(plan)
    assert "r1b2-host1" in reach["r1b1-host1"]


def test_bad_parameters_are_named_with_their_fix() -> None:
    with pytest.raises(BagParameterError) as caught:
        check(BagParams(regions=0, bundle=40, region_km=-1, fabric="mesh"))
    message = str(caught.value)
    for part in ("--regions 0: must be 1..8", "--bundle 40: must be 1..16",
                 "--region-km -1: must be 0..40000 km", "--fabric mesh: use dsf or nsf"):
        assert part in message

