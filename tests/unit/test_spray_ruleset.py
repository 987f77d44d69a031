"""The spray ruleset: one round-robin chain per plane set, destinations mapped onto them."""

from __future__ import annotations

from harness.fabrics.fpf import FpfParams, plan
from harness.spray.agent import spray_sets
from harness.spray.nic import format_planes, nic_planes, spraying_hosts
from harness.spray.ruleset import MARK_BASE, chain_name, nft_ruleset

ALL = {p: f"10.1.0.{2 * p + 1}" for p in range(8)}


def test_destinations_sharing_a_spray_set_share_a_chain():
    without_3 = {p: gw for p, gw in ALL.items() if p != 3}
    script = nft_ruleset({"10.0.0.26": ALL, "10.0.0.27": without_3, "10.0.0.28": without_3})
    assert script.count("numgen inc mod 8") == 1 and script.count("numgen inc mod 7") == 1
    assert f"10.0.0.27 : jump {chain_name(frozenset(without_3))}" in script
    assert f"10.0.0.28 : jump {chain_name(frozenset(without_3))}" in script
    assert f"3 : {MARK_BASE + 4:#x}" in script  # slot 3 of the 7-plane set is plane 4


def test_the_swap_is_one_atomic_transaction():
    lines = nft_ruleset({"10.0.0.1": ALL}).splitlines()
    assert lines[:2] == ["table inet fl_spray {}", "delete table inet fl_spray"]
    assert "type route hook output" in "\n".join(lines)  # a mark change re-routes the packet


def test_ipv4_and_ipv6_destinations_go_to_their_own_maps():
    script = nft_ruleset({"10.0.0.1": ALL, "fd00::1": {0: "fe80::1"}})
    assert "ip daddr vmap { 10.0.0.1 : jump planes_ff }" in script
    assert "ip6 daddr vmap { fd00::1 : jump planes_1 }" in script


def test_nothing_to_spray_leaves_an_empty_table():
    script = nft_ruleset({"10.0.0.1": {}})
    assert "vmap" not in script and "numgen" not in script


def test_chain_names_are_plane_bitmasks():
    assert chain_name(frozenset({0, 1, 3})) == "planes_b"
    assert chain_name(frozenset(range(8))) == "planes_ff"


def test_only_multi_plane_hosts_spray():
    p = plan(FpfParams(planes=2, leaves_per_plane=1, spines_per_plane=1, hosts=2))
    assert [n.name for n in spraying_hosts(p)] == ["host1", "host2"]
    assert nic_planes(p, p.node("host1")) == {"eth1": 0, "eth2": 1}


def test_plane_sets_print_as_ranges():
    assert format_planes({0, 1, 2, 4, 6, 7}) == "0-2,4,6-7"
    assert format_planes(set()) == "none"


def test_spray_sets_drop_planes_whose_bfd_is_down_for_both_families():
    """The link's one session carries IPv4 and IPv6: its BFD down takes the plane from both."""
    routes = {"10.0.0.27": dict(ALL), "fd00::27": {0: "fe80::1", 3: "fe80::2"}}
    wanted = spray_sets(routes, {3}, {})
    assert set(wanted["10.0.0.27"]) == set(range(8)) - {3}
    assert wanted["fd00::27"] == {0: "fe80::1"}


def test_a_destination_with_no_healthy_plane_is_not_sprayed():
    assert spray_sets({"10.0.0.27": {3: "10.1.0.7"}}, {3}, {}) == {}
    assert spray_sets({"10.0.0.27": {}}, set(), {}) == {}
    assert spray_sets({"10.0.0.27": {3: "10.1.0.7"}}, set(), {"10.0.0.27": {3: "loss"}}) == {}


def test_planes_the_probes_drained_leave_only_that_destination():
    routes = {"10.0.0.27": dict(ALL), "fd00::27": dict(ALL), "10.0.0.28": dict(ALL)}
    drained = {"10.0.0.27": {5: "silent"}, "fd00::27": {5: "silent", 6: "loss"}}
    wanted = spray_sets(routes, set(), drained)
    assert set(wanted["10.0.0.27"]) == set(range(8)) - {5}
    assert set(wanted["fd00::27"]) == set(range(8)) - {5, 6}
    assert wanted["10.0.0.28"] == ALL
