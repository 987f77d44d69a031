from __future__ import annotations

from ipaddress import ip_interface
from itertools import pairwise

import pytest

from harness.nodes.switch.render import sai_config
from harness.topology.augment import augment
from harness.topology.loader import load_text
from harness.topology.pipeline import plan_from_file
from harness.topology.plan import LabPlan
from harness.topology.reachability import reachable_origins
from tests.conftest import TOPOLOGIES


@pytest.fixture(scope="module")
def clos() -> LabPlan:
    return plan_from_file(TOPOLOGIES / "clos.yml")


def test_every_link_gets_a_31_and_a_127(clos: LabPlan) -> None:
    seen4, seen6 = set(), set()
    for node in clos.nodes:
        for iface in node.interfaces:
            v4, v6 = ip_interface(iface.ipv4), ip_interface(iface.ipv6)
            assert v4.network.prefixlen == 31 and v6.network.prefixlen == 127
            assert v4.ip not in seen4 and v6.ip not in seen6
            seen4.add(v4.ip)
            seen6.add(v6.ip)
    assert len(seen4) == 2 * len(clos.links)


def test_link_ends_share_a_subnet_and_name_each_other(clos: LabPlan) -> None:
    for link in clos.links:
        a = next(i for i in clos.node(link.a.node).interfaces if i.name == link.a.iface)
        b = next(i for i in clos.node(link.b.node).interfaces if i.name == link.b.iface)
        assert ip_interface(a.ipv4).network == ip_interface(b.ipv4).network
        assert a.peer == link.b and b.peer == link.a


def test_rfc7938_asns(clos: LabPlan) -> None:
    asn = {n.name: n.asn for n in clos.nodes}
    assert asn["spine1"] == asn["spine2"]
    leaves = [asn[f"leaf{i}"] for i in range(1, 5)]
    hosts = [asn[f"host{i}"] for i in range(1, 5)]
    assert len(set(leaves + hosts)) == 8 and asn["spine1"] not in leaves
    assert all(4_200_000_000 <= a < 4_294_967_295 for a in asn.values())


def test_one_session_per_link_per_side(clos: LabPlan) -> None:
    assert len(clos.sessions) == 2 * len(clos.links)
    by_pair = {(s.node, s.peer_ip) for s in clos.sessions}
    for s in clos.sessions:
        mirror = next(m for m in clos.sessions if m.node == s.peer and m.peer_ip == s.local_ip)
        assert mirror.peer_asn == s.local_asn and (s.node, s.peer_ip) in by_pair


def test_spines_of_one_asn_cannot_learn_each_other(clos: LabPlan) -> None:
    reach = reachable_origins(clos)
    assert "spine2" not in reach["spine1"]
    assert reach["host1"] == {n.name for n in clos.nodes} - {"host1"}


def test_hosts_are_not_transit() -> None:
    text = """
name: t
topology:
  nodes:
    a: {role: leaf}
    h: {role: host}
    b: {role: leaf}
  links:
    - endpoints: ["h:eth1", "a:eth1"]
    - endpoints: ["h:eth2", "b:eth1"]
"""
    reach = reachable_origins(augment(load_text(text)))
    assert reach["a"] == {"h"} and reach["b"] == {"h"} and reach["h"] == {"a", "b"}


def test_explicit_loopback_is_kept_and_skipped_by_the_pool() -> None:
    text = """
name: t
topology:
  nodes:
    a: {role: leaf}
    b: {role: leaf, loopback4: 10.0.0.1}
"""
    plan = augment(load_text(text))
    assert plan.node("b").loopback4 == "10.0.0.1"
    assert plan.node("a").loopback4 == "10.0.0.2"


def test_delay_from_distance_unless_given() -> None:
    text = """
name: t
topology:
  nodes:
    a: {role: leaf}
    b: {role: spine}
    c: {role: spine}
  links:
    - endpoints: ["a:eth1", "b:eth1"]
      distance_km: 1000
    - endpoints: ["a:eth2", "c:eth1"]
      distance_km: 1000
      delay: 1ms
      loss: 0.5%
      rate: 10Gbit
"""
    plan = augment(load_text(text))
    assert plan.links[0].impairment.delay_us == pytest.approx(4897, abs=5)
    second = plan.links[1].impairment
    assert (second.delay_us, second.loss_pct, second.rate_bps) == (1000, 0.5, 10**10)
    assert not second.is_clean


def test_defaults_and_kinds_merge_like_containerlab() -> None:
    text = """
name: t
topology:
  defaults: {role: leaf, labels: {site: a}}
  kinds: {frr: {group: fabric}}
  nodes:
    a: {}
    b: {role: spine, group: core}
"""
    plan = augment(load_text(text))
    a, b = plan.node("a"), plan.node("b")
    assert (a.role.value, a.group, a.labels) == ("leaf", "fabric", {"site": "a"})
    assert (b.role.value, b.group) == ("spine", "core")


def test_plan_round_trips_through_json(clos: LabPlan) -> None:
    assert LabPlan.model_validate_json(clos.model_dump_json()) == clos


def _chain(nodes: int, bgp: str) -> LabPlan:
    """A line of leaves: two BGP session ends per link."""
    names = [f"r{i}" for i in range(nodes)]
    links = "".join(f'\n    - endpoints: ["{a}:eth2", "{b}:eth1"]'
                    for a, b in pairwise(names))
    return augment(load_text(f"name: t\nbgp: {bgp}\ntopology:\n  nodes:\n" + "".join(
        f"    {n}: {{role: leaf}}\n" for n in names) + f"  links:{links}\n"))


def _timers(plan: LabPlan) -> tuple[int, int, list[str]]:
    return plan.keepalive, plan.hold, plan.notes


def test_bgp_timers_stretch_with_the_lab_only_under_bfd() -> None:
    """Past the budget each keepalive goes out less often (said at deploy); without BFD the
    hold time is the failure detector and stays at FRR's datacenter 3 s / 9 s."""
    assert _timers(_chain(201, "{bfd: {}, keepalive_budget: 200}")) == (3, 9, [])  # 400 ends
    assert _timers(_chain(201, "{bfd: {}, keepalive_budget: 50}")) == (8, 24, [
        "BGP keepalive every 8 s, hold time 24 s (not 3 s and 9 s): 400 session ends stay "
        "within 50 keepalives a second (bgp.keepalive_budget); BFD finds a dead link in "
        "300 ms, the hold time only a hung bgpd"])
    assert _timers(_chain(201, "{bfd: {}, keepalive_budget: 10}"))[:2] == (40, 120)
    assert _timers(_chain(401, "{bfd: {}, keepalive_budget: 10}"))[:2] == (60, 180)  # FRR's
    assert _timers(_chain(201, "{keepalive_budget: 50}")) == (3, 9, [])


def test_bgp_timers_the_topology_gives_are_kept() -> None:
    """The other timer follows the one given: a hold time of three keepalives."""
    assert _timers(_chain(101, "{bfd: {}, keepalive_budget: 50, keepalive: 5}")) == (5, 15, [])
    assert _timers(_chain(2, "{hold: 30}")) == (10, 30, [])
    assert _timers(_chain(2, "{keepalive: 2, hold: 7}")) == (2, 7, [])


def test_bfd_stretches_with_the_lab_past_its_packet_budget() -> None:
    """Every session end sends a control packet each interval: past the budget they go out
    less often, and the deploy says how late a dead link is found; within it, as asked."""
    assert _chain(201, "{bfd: {interval: 100ms}}").bfd.interval_ms == 100  # 4,000 a second
    plan = _chain(201, "{bfd: {interval: 100ms, budget_pps: 1000}, keepalive: 3}")
    assert plan.bfd.interval_ms == 400 and plan.notes == [
        "BFD every 400 ms, not 100 ms: 400 session ends stay within 1,000 control packets a "
        "second (bgp.bfd.budget_pps); a dead link is found in 1200 ms"]
    slower = _chain(201, "{bfd: {interval: 100ms, budget_pps: 1000}, keepalive_budget: 50}")
    assert "BFD finds a dead link in 1200 ms" in slower.notes[0]  # the stretched detection
    assert _chain(201, "{bfd: {interval: 1s, budget_pps: 1000}}").bfd.interval_ms == 1000


def test_link_bandwidth_is_the_port_speed_of_both_ends_in_the_switch_document() -> None:
    text = """
name: bw
topology:
  nodes: {leaf1: {role: leaf, kind: sai}, spine1: {role: spine, kind: sai},
          spine2: {role: spine, kind: sai}}
  links:
    - {endpoints: ["leaf1:eth1", "spine1:eth1"], bandwidth: 400Gbit}
    - {endpoints: ["leaf1:eth2", "spine2:eth1"]}
"""
    plan = augment(load_text(text))
    assert sai_config(plan, plan.node("leaf1")) == {"PORT|eth1": {"SAI_PORT_ATTR_SPEED": 400_000}}
    assert sai_config(plan, plan.node("spine1")) == {"PORT|eth1": {"SAI_PORT_ATTR_SPEED": 400_000}}
    assert sai_config(plan, plan.node("spine2")) == {}  # the switch's profile speed


TWO_REGIONS = """
name: scoped
topology:
  defaults: {kind: frr}
  nodes:
    a-leaf: {role: leaf, region: east, building: a}
    a-spine1: {role: spine, region: east, building: a}
    a-spine2: {role: spine, region: east, building: a}
    b-leaf: {role: leaf, region: east, building: b}
    b-spine: {role: spine, region: east, building: b}
    east-bag: {role: bag, region: east}
    west-leaf: {role: leaf, region: west, building: c}
    west-spine: {role: spine, region: west, building: c}
    west-bag: {role: bag, region: west}
  links:
    - endpoints: ["a-leaf:eth1", "a-spine1:eth1"]
    - endpoints: ["a-leaf:eth2", "a-spine2:eth1"]
    - endpoints: ["a-spine1:eth2", "east-bag:eth1"]
    - endpoints: ["a-spine2:eth2", "east-bag:eth2"]
    - endpoints: ["b-leaf:eth1", "b-spine:eth1"]
    - endpoints: ["b-spine:eth2", "east-bag:eth3"]
    - endpoints: ["east-bag:eth4", "west-bag:eth1"]
    - endpoints: ["west-leaf:eth1", "west-spine:eth1"]
    - endpoints: ["west-spine:eth2", "west-bag:eth2"]
"""


def test_shared_asns_are_scoped_by_building_and_region() -> None:
    """Every building's spines share one ASN, but not with another building's (or building b
    would drop a's routes as an AS-path loop); a region's BAG switches share one, and the
    two regions' differ (their sessions are eBGP). Every leaf then reaches every other."""
    plan = augment(load_text(TWO_REGIONS))
    asn = {n.name: n.asn for n in plan.nodes}
    assert asn["a-spine1"] == asn["a-spine2"] != asn["b-spine"] != asn["west-spine"]
    assert asn["east-bag"] != asn["west-bag"]
    assert len({asn["a-spine1"], asn["b-spine"], asn["west-spine"], asn["east-bag"],
                asn["west-bag"], asn["a-leaf"], asn["b-leaf"], asn["west-leaf"]}) == 8
    reach = reachable_origins(plan)
    for leaf in ("a-leaf", "b-leaf", "west-leaf"):
        assert {"a-leaf", "b-leaf", "west-leaf"} - {leaf} <= reach[leaf], (leaf, reach[leaf])
    assert "a-spine2" not in reach["a-spine1"]  # one building's spines: a valley is a loop
    unscoped = augment(load_text(TWO_REGIONS.replace(", region: east, building: a", "")
                                 .replace(", region: east, building: b", "")))
    assert "a-leaf" not in reachable_origins(unscoped)["b-leaf"]  # what scoping fixes
