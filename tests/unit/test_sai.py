"""The SAI object model against the fake backend: status codes, references, capacity, weights."""

from __future__ import annotations

from ipaddress import ip_network

import pytest

from harness.nodes.switch.sai.api import SaiSwitch
from harness.nodes.switch.sai.backend import Discovery
from harness.nodes.switch.sai.capacity import CapacityProfile
from harness.nodes.switch.sai.fake import FakeBackend
from harness.nodes.switch.sai.status import Status
from harness.nodes.switch.sai.types import IpPrefix, ObjectType, RouteKey, format_oid, oid_type

T = ObjectType


def make_switch(**kwargs) -> tuple[SaiSwitch, FakeBackend]:
    backend = FakeBackend(kwargs.pop("discovery", None))
    return SaiSwitch(backend, **kwargs), backend


def port_and_rif(sw: SaiSwitch, lane: int = 7) -> tuple[int, int]:
    status, port = sw.create(T.PORT, {"SAI_PORT_ATTR_HW_LANE_LIST": [lane]})
    assert status is Status.SUCCESS
    status, rif = sw.create(T.ROUTER_INTERFACE, {
        "SAI_ROUTER_INTERFACE_ATTR_VIRTUAL_ROUTER_ID": sw.default_vr,
        "SAI_ROUTER_INTERFACE_ATTR_TYPE": "SAI_ROUTER_INTERFACE_TYPE_PORT",
        "SAI_ROUTER_INTERFACE_ATTR_PORT_ID": port})
    assert status is Status.SUCCESS
    return port, rif  # type: ignore[return-value]


def next_hop(sw: SaiSwitch, rif: int, ip: str) -> int:
    status, oid = sw.create(T.NEXT_HOP, {"SAI_NEXT_HOP_ATTR_TYPE": "SAI_NEXT_HOP_TYPE_IP",
                                         "SAI_NEXT_HOP_ATTR_IP": ip,
                                         "SAI_NEXT_HOP_ATTR_ROUTER_INTERFACE_ID": rif})
    assert status is Status.SUCCESS
    return oid  # type: ignore[return-value]


def route(sw: SaiSwitch, prefix: str) -> RouteKey:
    return RouteKey(sw.default_vr, IpPrefix.parse(prefix))


def test_oids_carry_their_type_and_attributes_read_back() -> None:
    sw, backend = make_switch()
    port, rif = port_and_rif(sw)
    assert oid_type(port) is T.PORT and oid_type(rif) is T.ROUTER_INTERFACE
    status, attrs = sw.get(port, ["SAI_PORT_ATTR_HW_LANE_LIST", "SAI_PORT_ATTR_ADMIN_STATE"])
    assert status is Status.SUCCESS and attrs == {"SAI_PORT_ATTR_HW_LANE_LIST": (7,),
                                                  "SAI_PORT_ATTR_ADMIN_STATE": True}
    assert sw.get(port, ["SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID"])[0] is Status.INVALID_PARAMETER
    assert backend.calls == [("create", port), ("create", rif)]


@pytest.mark.parametrize(("attrs", "expected"), [
    ({}, Status.MANDATORY_ATTRIBUTE_MISSING),
    ({"SAI_PORT_ATTR_HW_LANE_LIST": []}, Status.INVALID_PARAMETER),
    ({"SAI_PORT_ATTR_HW_LANE_LIST": [1], "SAI_PORT_ATTR_MTU": 10}, Status.INVALID_PARAMETER),
    ({"SAI_PORT_ATTR_HW_LANE_LIST": [1], "SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID": 1},
     Status.INVALID_PARAMETER),
    ({"SAI_PORT_ATTR_HW_LANE_LIST": [1], "SAI_PORT_ATTR_QOS_DSCP_TO_TC_MAP": 1 << 48},
     Status.INVALID_OBJECT_ID),
])
def test_bad_attributes_get_sai_status_codes(attrs: dict, expected: Status) -> None:
    sw, backend = make_switch()
    assert sw.create(T.PORT, attrs) == (expected, None)
    assert backend.calls == []


def test_create_only_attributes_cannot_be_set_and_missing_objects_are_not_found() -> None:
    sw, _ = make_switch()
    port, _ = port_and_rif(sw)
    assert sw.set(port, "SAI_PORT_ATTR_HW_LANE_LIST", [9]) is Status.INVALID_PARAMETER
    assert sw.set(port, "SAI_PORT_ATTR_ADMIN_STATE", False) is Status.SUCCESS
    assert sw.get(port, ["SAI_PORT_ATTR_ADMIN_STATE"])[1] == {"SAI_PORT_ATTR_ADMIN_STATE": False}
    assert sw.remove(port + 1000) is Status.ITEM_NOT_FOUND
    assert sw.create(T.PORT, {"SAI_PORT_ATTR_HW_LANE_LIST": [7]})[0] is \
        Status.ITEM_ALREADY_EXISTS


def test_a_next_hop_in_use_by_a_route_cannot_be_removed() -> None:
    sw, _ = make_switch()
    _, rif = port_and_rif(sw)
    nh = next_hop(sw, rif, "10.1.0.1")
    key = route(sw, "10.9.0.0/24")
    assert sw.create(T.ROUTE_ENTRY, {"SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID": nh}, key=key)[0].ok
    assert sw.create(T.ROUTE_ENTRY, {"SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID": nh}, key=key)[0] is \
        Status.ITEM_ALREADY_EXISTS
    assert sw.refcount(nh) == 1
    assert sw.remove(nh) is Status.OBJECT_IN_USE
    assert sw.remove(rif) is Status.OBJECT_IN_USE
    assert sw.remove(key) is Status.SUCCESS
    assert sw.refcount(nh) == 0 and sw.remove(nh) is Status.SUCCESS


def test_routes_need_a_target_and_existing_references() -> None:
    sw, _ = make_switch()
    _, rif = port_and_rif(sw)
    key = route(sw, "10.9.0.0/24")
    assert sw.create(T.ROUTE_ENTRY, {}, key=key)[0] is Status.INVALID_PARAMETER
    assert sw.create(T.ROUTE_ENTRY, {"SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID": rif + 99},
                     key=key)[0] is Status.INVALID_OBJECT_ID
    assert sw.create(T.ROUTE_ENTRY, {"SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID": rif}, key=key)[0].ok
    assert sw.create(T.ROUTE_ENTRY, {}, key=None)[0] is Status.INVALID_PARAMETER
    drop = route(sw, "10.8.0.0/24")
    assert sw.create(T.ROUTE_ENTRY, {"SAI_ROUTE_ENTRY_ATTR_PACKET_ACTION":
                                     "SAI_PACKET_ACTION_DROP"}, key=drop)[0].ok


def test_a_bulk_create_settles_each_entry_and_traces_it_in_sai_terms() -> None:
    sw, _ = make_switch()
    _, rif = port_and_rif(sw)
    nh = next_hop(sw, rif, "10.1.0.1")
    attrs = {"SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID": nh}
    keys = [route(sw, p) for p in ("10.0.0.0/24", "10.0.1.0/24", "10.0.0.0/24", "fd00:1::/64")]
    results = sw.create_bulk(T.ROUTE_ENTRY, [(key, attrs) for key in keys])
    assert [s for s, _ in results] == [Status.SUCCESS, Status.SUCCESS,
                                       Status.ITEM_ALREADY_EXISTS, Status.SUCCESS]
    assert sw.refcount(nh) == 3 and sw.record(keys[0]) == sw.record(keys[3])
    lines = {line.split(" ", 1)[1] for line in sw.trace.lines}
    vr = f"vr_id={format_oid(sw.default_vr)}"
    assert f"create SAI_OBJECT_TYPE_ROUTE_ENTRY {{{vr} destination=fd00:1::/64}} " \
        f"SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID={format_oid(nh)} -> SAI_STATUS_SUCCESS" in lines
    assert f"create SAI_OBJECT_TYPE_ROUTE_ENTRY {{{vr} destination=10.0.0.0/24}} " \
        f"SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID={format_oid(nh)} -> " \
        "SAI_STATUS_ITEM_ALREADY_EXISTS" in lines


def test_route_table_full_past_capacity_and_after_shrinking() -> None:
    sw, _ = make_switch(capacity=CapacityProfile(routes=3))
    _, rif = port_and_rif(sw)
    attrs = {"SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID": rif}
    results = sw.create_bulk(T.ROUTE_ENTRY, [(route(sw, f"10.0.{i}.0/24"), attrs)
                                             for i in range(5)])
    assert [s for s, _ in results] == [Status.SUCCESS] * 3 + [Status.TABLE_FULL] * 2
    assert sw.count(T.ROUTE_ENTRY) == 3
    sw.capacity = sw.capacity.shrunk(T.ROUTE_ENTRY, 1)
    assert sw.create(T.ROUTE_ENTRY, attrs, key=route(sw, "10.1.0.0/24"))[0] is Status.TABLE_FULL
    assert sw.count(T.ROUTE_ENTRY) == 3  # shrinking never evicts


def test_group_members_carry_weights_and_pin_their_group() -> None:
    sw, backend = make_switch()
    _, rif = port_and_rif(sw)
    a, b = next_hop(sw, rif, "10.1.0.1"), next_hop(sw, rif, "10.1.0.3")
    _, group = sw.create(T.NEXT_HOP_GROUP, {"SAI_NEXT_HOP_GROUP_ATTR_TYPE":
                                            "SAI_NEXT_HOP_GROUP_TYPE_ECMP"})
    member = {"SAI_NEXT_HOP_GROUP_MEMBER_ATTR_NEXT_HOP_GROUP_ID": group}
    _, ma = sw.create(T.NEXT_HOP_GROUP_MEMBER, {
        **member, "SAI_NEXT_HOP_GROUP_MEMBER_ATTR_NEXT_HOP_ID": a,
        "SAI_NEXT_HOP_GROUP_MEMBER_ATTR_WEIGHT": 3})
    _, mb = sw.create(T.NEXT_HOP_GROUP_MEMBER, {
        **member, "SAI_NEXT_HOP_GROUP_MEMBER_ATTR_NEXT_HOP_ID": b})
    assert sw.create(T.NEXT_HOP_GROUP_MEMBER, {
        **member, "SAI_NEXT_HOP_GROUP_MEMBER_ATTR_NEXT_HOP_ID": b})[0] is \
        Status.ITEM_ALREADY_EXISTS
    assert sw.create(T.NEXT_HOP_GROUP_MEMBER, {
        **member, "SAI_NEXT_HOP_GROUP_MEMBER_ATTR_NEXT_HOP_ID": a,
        "SAI_NEXT_HOP_GROUP_MEMBER_ATTR_WEIGHT": 0})[0] is Status.INVALID_PARAMETER
    assert {m.next_hop_id: m.weight for m in sw.members(group).values()} == {a: 3, b: 1}
    assert sw.set(mb, "SAI_NEXT_HOP_GROUP_MEMBER_ATTR_WEIGHT", 2).ok
    assert backend.programmed[mb].weight == 2
    assert sw.remove(group) is Status.OBJECT_IN_USE
    assert sw.remove(a) is Status.OBJECT_IN_USE
    assert sw.remove_bulk([ma, mb]) == [Status.SUCCESS, Status.SUCCESS]
    assert sw.remove(group).ok and sw.remove(a).ok


def test_buffer_profiles_must_fit_their_pool_with_headroom() -> None:
    sw, _ = make_switch()
    _, pool = sw.create(T.BUFFER_POOL, {"SAI_BUFFER_POOL_ATTR_TYPE": "SAI_BUFFER_POOL_TYPE_INGRESS",
                                        "SAI_BUFFER_POOL_ATTR_SIZE": 100_000})
    lossless = {"SAI_BUFFER_PROFILE_ATTR_POOL_ID": pool,
                "SAI_BUFFER_PROFILE_ATTR_RESERVED_BUFFER_SIZE": 20_000,
                "SAI_BUFFER_PROFILE_ATTR_XOFF_TH": 30_000, "SAI_BUFFER_PROFILE_ATTR_XON_TH": 10_000}
    assert sw.create(T.BUFFER_PROFILE, lossless)[0].ok
    assert sw.create(T.BUFFER_PROFILE, lossless)[0].ok
    assert sw.create(T.BUFFER_PROFILE, lossless)[0] is Status.INSUFFICIENT_RESOURCES
    assert sw.create(T.BUFFER_PROFILE, {**lossless, "SAI_BUFFER_PROFILE_ATTR_XON_TH": 60_000}
                     )[0] is Status.INVALID_PARAMETER
    assert sw.remove(pool) is Status.OBJECT_IN_USE


def test_qos_maps_are_range_checked_and_attach_to_ports() -> None:
    sw, _ = make_switch()
    port, _ = port_and_rif(sw)
    dscp = {"SAI_QOS_MAP_ATTR_TYPE": "SAI_QOS_MAP_TYPE_DSCP_TO_TC"}
    status, qmap = sw.create(T.QOS_MAP, {**dscp, "SAI_QOS_MAP_ATTR_MAP_TO_VALUE_LIST":
                                         {46: 5, 26: 3, 0: 0}})
    assert status.ok
    assert sw.create(T.QOS_MAP, {**dscp, "SAI_QOS_MAP_ATTR_MAP_TO_VALUE_LIST": {46: 9}})[0] is \
        Status.INVALID_PARAMETER
    assert sw.create(T.QOS_MAP, {"SAI_QOS_MAP_ATTR_TYPE": "SAI_QOS_MAP_TYPE_TC_TO_QUEUE",
                                 "SAI_QOS_MAP_ATTR_MAP_TO_VALUE_LIST": {9: 1}})[0] is \
        Status.INVALID_PARAMETER
    assert sw.set(port, "SAI_PORT_ATTR_QOS_DSCP_TO_TC_MAP", qmap).ok
    assert sw.remove(qmap) is Status.OBJECT_IN_USE


def test_srv6_sid_lists_and_my_sids_validate_their_behaviour() -> None:
    sw, _ = make_switch()
    _, rif = port_and_rif(sw)
    status, sids = sw.create(T.SRV6_SIDLIST, {"SAI_SRV6_SIDLIST_ATTR_SEGMENT_LIST":
                                              ["fc00:0:1::", "fc00:0:2::"]})
    assert status.ok
    status, te = sw.create(T.NEXT_HOP, {"SAI_NEXT_HOP_ATTR_TYPE": "SAI_NEXT_HOP_TYPE_SRV6_SIDLIST",
                                        "SAI_NEXT_HOP_ATTR_SRV6_SIDLIST_ID": sids,
                                        "SAI_NEXT_HOP_ATTR_ROUTER_INTERFACE_ID": rif})
    assert status.ok and sw.remove(sids) is Status.OBJECT_IN_USE
    from harness.nodes.switch.sai.types import MySidKey
    key = MySidKey(sw.default_vr, ip_network("fc00:0:3::/128").network_address)
    end_x = {"SAI_MY_SID_ENTRY_ATTR_ENDPOINT_BEHAVIOR": "SAI_MY_SID_ENTRY_ENDPOINT_BEHAVIOR_X"}
    assert sw.create(T.MY_SID_ENTRY, end_x, key=key)[0] is Status.INVALID_PARAMETER
    nh = next_hop(sw, rif, "fe80::1")
    assert sw.create(T.MY_SID_ENTRY, {**end_x, "SAI_MY_SID_ENTRY_ATTR_NEXT_HOP_ID": nh},
                     key=key)[0].ok
    assert sw.remove(nh) is Status.OBJECT_IN_USE
    assert sw.create(T.SRV6_SIDLIST, {"SAI_SRV6_SIDLIST_ATTR_SEGMENT_LIST": ["10.0.0.1"]})[0] \
        is Status.INVALID_PARAMETER
    assert te


def test_injected_faults_fail_calls_without_touching_the_backend() -> None:
    sw, backend = make_switch()
    _, rif = port_and_rif(sw)
    sw.faults.add("create", "ROUTE_ENTRY", 1.0, Status.TABLE_FULL)
    calls = len(backend.calls)
    assert sw.create(T.ROUTE_ENTRY, {"SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID": rif},
                     key=route(sw, "10.0.0.0/24"))[0] is Status.TABLE_FULL
    assert len(backend.calls) == calls and sw.faults.injected == 1
    assert next_hop(sw, rif, "10.1.0.1")  # other types are untouched
    sw.faults.clear()
    sw.faults.add("create", "*", 0.5)
    results = [sw.create(T.NEXT_HOP, {"SAI_NEXT_HOP_ATTR_TYPE": "SAI_NEXT_HOP_TYPE_IP",
                                      "SAI_NEXT_HOP_ATTR_IP": f"10.2.0.{i}",
                                      "SAI_NEXT_HOP_ATTR_ROUTER_INTERFACE_ID": rif})[0]
               for i in range(200)]
    failed = results.count(Status.FAILURE)
    assert 60 < failed < 140 and failed == sw.faults.injected - 1
    assert "injected fault" in "\n".join(sw.trace.lines)
    with pytest.raises(ValueError, match="rate"):
        sw.faults.add("create", "*", 1.5)


def test_a_backend_refusal_is_rolled_back() -> None:
    sw, backend = make_switch()
    _, rif = port_and_rif(sw)
    backend.refuse.add("create")
    assert sw.create(T.ROUTE_ENTRY, {"SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID": rif},
                     key=route(sw, "10.0.0.0/24"))[0] is Status.FAILURE
    assert sw.count(T.ROUTE_ENTRY) == 0 and sw.refcount(rif) == 0


def test_warm_adopt_reads_back_next_hops_groups_and_routes() -> None:
    discovery = Discovery(next_hops={101: ("10.1.0.1", 7), 102: ("10.1.0.3", 7)},
                          groups={103: [(101, 1), (102, 3)]},
                          routes={"10.0.0.4/32": ("nh", 103), "10.1.0.0/31": ("lane", 7),
                                  "10.9.0.0/24": ("drop", None), "10.8.0.0/24": ("lane", 99)})
    sw, backend = make_switch(discovery=discovery,
                              attrs={"SAI_SWITCH_ATTR_INIT_SWITCH": True,
                                     "SAI_SWITCH_ATTR_RESTART_WARM": True})
    _, rif = port_and_rif(sw)
    calls = len(backend.calls)
    assert sw.warm_adopt() == 6  # 2 next hops, 1 group, 3 routes (lane 99 is no port)
    assert len(backend.calls) == calls  # nothing written to the hardware
    (group,) = sw.objects(T.NEXT_HOP_GROUP)
    assert sorted(m.weight for m in sw.members(group).values()) == [1, 3]  # type: ignore[arg-type]
    routes = sw.objects(T.ROUTE_ENTRY)
    assert routes[route(sw, "10.0.0.4/32")].next_hop_id == group  # type: ignore[attr-defined]
    assert routes[route(sw, "10.1.0.0/31")].next_hop_id == rif  # type: ignore[attr-defined]
    assert sw.remove(group) is Status.OBJECT_IN_USE
