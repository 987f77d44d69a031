"""RBB planned without root: the generator and the shipped rbb-mini.yml, SIDs laid out per
router, policies compiled to SID lists, and bad policies refused with file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.errors import TopologyError
from harness.fabrics.rbb import RbbParameterError, RbbParams, check, generate
from harness.nodes.switch.render import sai_config, te_policies
from harness.topology.augment import augment
from harness.topology.loader import dump_yaml, load_text
from harness.topology.pipeline import plan_from_file
from harness.topology.plan import LabPlan
from tests.conftest import TOPOLOGIES, regenerated


@pytest.fixture(scope="module")
def mini() -> LabPlan:
    return plan_from_file(TOPOLOGIES / "rbb-mini.yml")


def test_the_shipped_file_is_what_its_generated_by_command_writes(tmp_path: Path) -> None:
    shipped, generated = regenerated("rbb-mini.yml", tmp_path)
    assert generated == shipped


def test_each_router_has_a_locator_and_its_sids_in_it(mini: LabPlan) -> None:
    routers = {n.name: n for n in mini.nodes if n.locator}
    assert {name: n.locator for name, n in routers.items()} == {
        f"bb{i}": f"fcbb:bbbb:{i}::/48" for i in range(1, 5)}
    bb1 = routers["bb1"]
    assert [(s.sid, s.behavior, s.iface) for s in bb1.sids] == [
        ("fcbb:bbbb:1:1::", "End", None), ("fcbb:bbbb:1:d6::", "End.DT6", None),
        ("fcbb:bbbb:1:d4::", "End.DT4", None), ("fcbb:bbbb:1:d46::", "End.DT46", None),
        ("fcbb:bbbb:1:1001::", "End.X", "eth1"), ("fcbb:bbbb:1:1002::", "End.X", "eth2"),
        ("fcbb:bbbb:1:1003::", "End.X", "eth3"), ("fcbb:bbbb:1:4004::", "End.DX4", "eth4"),
        ("fcbb:bbbb:1:6004::", "End.DX6", "eth4")]
    peer = {i.name: i.peer.node for i in bb1.interfaces}
    assert peer == {"eth1": "bb2", "eth2": "bb4", "eth3": "bb3", "eth4": "campus1-edge"}


def test_a_path_of_node_names_compiles_to_end_x_then_the_tails_decapsulation(
        mini: LabPlan) -> None:
    v6, v4 = mini.srv6.policies  # type: ignore[union-attr]
    assert (v6.path.segments, v6.path.hops, v6.path.iface) == (
        ["fcbb:bbbb:2:1002::", "fcbb:bbbb:3:d6::"], ["bb1", "bb2", "bb3"], "eth1")
    assert v6.fallback.segments == ["fcbb:bbbb:4:1001::", "fcbb:bbbb:3:d6::"]  # type: ignore[union-attr]
    # IPv4 ends at End.DT4, a lookup in bb3's table; its probes come home through End.DT6
    assert v4.path.segments == ["fcbb:bbbb:2:1002::", "fcbb:bbbb:3:d4::"]
    assert v4.path.probe == ["fcbb:bbbb:2:1002::", "fcbb:bbbb:3:d6::"]


def test_the_headend_gets_its_sid_lists_and_the_te_layer_its_policies(mini: LabPlan) -> None:
    bb1 = mini.node("bb1")
    document = sai_config(mini, bb1)
    assert document["SRV6_SIDLIST|v6-c1-to-c2"]["SAI_SRV6_SIDLIST_ATTR_SEGMENT_LIST"] == \
        ["fcbb:bbbb:2:1002::", "fcbb:bbbb:3:d6::"]
    assert document["NEXT_HOP|v6-c1-to-c2-fallback"]["SAI_NEXT_HOP_ATTR_ROUTER_INTERFACE_ID"] \
        == "ROUTER_INTERFACE|eth2"
    assert document["MY_SID_ENTRY|fcbb:bbbb:1:4004::"]["SAI_MY_SID_ENTRY_ATTR_NEXT_HOP_ID"] == \
        "NEXT_HOP|eth4-v4"
    te = te_policies(mini, bb1)
    assert te["source"] == bb1.loopback6
    assert [(p["name"], [q["next_hop"] for q in p["paths"]]) for p in te["policies"]] == [
        ("v6-c1-to-c2", ["NEXT_HOP|v6-c1-to-c2", "NEXT_HOP|v6-c1-to-c2-fallback"]),
        ("v4-c1-to-c2", ["NEXT_HOP|v4-c1-to-c2", "NEXT_HOP|v4-c1-to-c2-fallback"])]
    assert te_policies(mini, mini.node("bb2"))["policies"] == []
    assert not any(k.startswith("SRV6_SIDLIST") for k in sai_config(mini, mini.node("bb2")))


BAD = """
name: rbb-bad
srv6:
  policies:
    - {name: p1, headend: bb1, destination: "fd00:100:2::/64", path: [bb3, bb2]}
    - {name: p2, headend: bb1, destination: "fd00:100:2::/64", path: [bb2, "fcbb:bbbb:9::1"]}
    - {name: p3, headend: bb1, destination: "fd00:100:2::/64", path: [bb2, "fcbb:bbbb:2:77::"]}
    - {name: p4, headend: bbx, destination: "fd00:100:2::/64", path: [bb2]}
    - {name: p5, headend: bb1, destination: "fd00:100:2::/64", path: [bb2, "fcbb:bbbb:3:d4::"]}
    - {name: p6, headend: bb1, destination: "10.2.0.0/16", path: [bb2, "fcbb:bbbb:3:d46::"]}
    - {name: p7, headend: bb1, destination: "fd00:100:2::/64", path: [bb2, "fcbb:bbbb:3:d46::"]}
topology:
  nodes:
    bb1: {role: backbone, kind: sai}
    bb2: {role: backbone, kind: sai}
    bb3: {role: backbone, kind: sai}
  links:
    - endpoints: ["bb1:eth1", "bb2:eth1"]
    - endpoints: ["bb2:eth2", "bb3:eth1"]
"""


def test_bad_policies_are_refused_before_anything_is_deployed(tmp_path: Path) -> None:
    source = tmp_path / "rbb-bad.yml"
    source.write_text(BAD)
    with pytest.raises(TopologyError) as refused:
        augment(load_text(BAD, str(source)))
    text = str(refused.value)
    assert f"{source}:5: srv6.policies[0].path[0]: no link between bb1 and bb3" in text
    assert f"{source}:6: srv6.policies[1].path[1]: SID fcbb:bbbb:9::1 is outside every " \
        "locator" in text
    assert "srv6.policies[2].path[1]: fcbb:bbbb:2:77:: is in bb2's locator but is none of " \
        "its SIDs" in text
    assert "srv6.policies[3].headend: unknown node 'bbx'" in text
    assert "srv6.policies[4].path[1]: the path ends at fcbb:bbbb:3:d4:: (End.DT4), which does " \
        "not decapsulate fd00:100:2::/64\n    fix: end it at the tail's End.DT6, End.DT46, " \
        "End.DX6 (or its node name)" in text
    assert "policies[5]" not in text and "policies[6]" not in text  # End.DT46 takes both


def test_bad_generator_parameters_are_named_with_their_fix() -> None:
    with pytest.raises(RbbParameterError, match=r"--routers 2: must be 3\.\.64"):
        check(RbbParams(routers=2))
    with pytest.raises(RbbParameterError, match="--campuses 5: at most one campus per router"):
        check(RbbParams(routers=4, campuses=5))


def test_joined_to_a_bag_lab_its_regions_are_the_campuses(tmp_path: Path) -> None:
    """One lab of both: the BAG file's nodes and links as written, each region's BAG switches
    linked to that campus's router, and no hosts or edges of the RBB's own."""
    bag_text = (TOPOLOGIES / "bag-mini.yml").read_text()
    joined = generate(RbbParams(routers=4, campuses=2, cloud=0, name="bag-rbb",
                                join=str(TOPOLOGIES / "bag-mini.yml")))
    bag = load_text(bag_text, "bag-mini.yml").spec.topology
    nodes, links = joined["topology"]["nodes"], joined["topology"]["links"]
    assert set(nodes) == set(bag.nodes) | {"bb1", "bb2", "bb3", "bb4"}
    assert links[:len(bag.links)] == [link.model_dump(exclude_none=True, exclude_defaults=True)
                                      for link in bag.links]
    to_backbone = {tuple(sorted(end.split(":")[0] for end in link["endpoints"]))
                   for link in links[len(bag.links):] if "bag" in str(link["endpoints"])}
    assert to_backbone == {("bb1", "r1-bag1"), ("bb1", "r1-bag2"), ("bb3", "r2-bag1"),
                           ("bb3", "r2-bag2")}
    source = tmp_path / "bag-rbb.yml"
    source.write_text(dump_yaml(joined))
    plan = plan_from_file(source)
    assert [n.name for n in plan.nodes if n.locator] == ["bb1", "bb2", "bb3", "bb4"]
    with pytest.raises(RbbParameterError, match="the joined BAG lab has 2 regions"):
        generate(RbbParams(routers=4, campuses=3, join=str(TOPOLOGIES / "bag-mini.yml")))
