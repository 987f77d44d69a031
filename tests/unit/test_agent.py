"""The agent without a kernel: zebra-shaped FPM frames in, SAI calls on the fake backend out."""

from __future__ import annotations

import socket
import struct

import pytest

from harness.linux.rtnl_messages import (
    NLM_F_CREATE,
    NLM_F_REPLACE,
    RTM_NEWNEXTHOP,
    nhmsg,
    pack_address,
    pack_group,
    route_message,
)
from harness.linux.rtnl_route import RTM_DELROUTE, RTM_NEWROUTE
from harness.nodes.switch.agent.decode import Hop, RouteDelete, RouteUpdate, decode
from harness.nodes.switch.agent.fpm import FpmError, FpmReader, frame
from harness.nodes.switch.agent.orch import NEXT_HOP_ID, RouteOrch
from harness.nodes.switch.sai.api import SaiSwitch
from harness.nodes.switch.sai.fake import FakeBackend
from harness.nodes.switch.sai.status import Status
from harness.nodes.switch.sai.types import IpPrefix, ObjectType

T = ObjectType
ETH1, ETH2 = 2, 3


def nexthop(nh_id: int, gateway: str | None = None, oif: int = 0,
            group: list[tuple[int, int]] | None = None) -> bytes:
    msg = nhmsg()
    msg["family"] = socket.AF_INET
    msg["protocol"] = 11  # zebra
    attrs: list = [("NHA_ID", nh_id)]
    if group:
        attrs.append(("NHA_GROUP", pack_group(group)))
    else:
        attrs.append(("NHA_OIF", oif))
        if gateway:
            attrs.append(("NHA_GATEWAY", pack_address(gateway)))
    msg["attrs"] = attrs
    msg["header"]["type"] = RTM_NEWNEXTHOP
    msg["header"]["flags"] = NLM_F_CREATE | NLM_F_REPLACE
    msg.encode()
    return bytes(msg.data)


def route(prefix: str, nh_id: int = 0, delete: bool = False, blackhole: bool = False) -> bytes:
    address, plen = prefix.split("/")
    packed = pack_address(address)
    return route_message(RTM_DELROUTE if delete else RTM_NEWROUTE,
                         NLM_F_CREATE | NLM_F_REPLACE, 0, packed, int(plen), 254, 186,
                         nh_id=nh_id, blackhole=blackhole)


def inline_route(prefix: str, gateway: str, oif: int) -> bytes:
    address, plen = prefix.split("/")
    dst = pack_address(address)
    attrs = (struct.pack("=HH", 4 + len(dst), 1) + dst + struct.pack("=HHI", 8, 15, 254)
             + struct.pack("=HH", 8, 5) + pack_address(gateway) + struct.pack("=HHI", 8, 4, oif))
    header = struct.pack("=IHHIIBBBBBBBBI", 28 + len(attrs), RTM_NEWROUTE, 0, 0, 0,
                         socket.AF_INET, int(plen), 0, 0, 254, 186, 0, 1, 0)
    return header + attrs


@pytest.fixture
def orch() -> tuple[RouteOrch, FakeBackend]:
    backend = FakeBackend()
    sai = SaiSwitch(backend, attrs={"SAI_SWITCH_ATTR_INIT_SWITCH": True,
                                    "SAI_SWITCH_ATTR_RESTART_WARM": True})
    o = RouteOrch(sai)
    for lane in (ETH1, ETH2):
        _, port = sai.create(T.PORT, {"SAI_PORT_ATTR_HW_LANE_LIST": [lane]})
        _, rif = sai.create(T.ROUTER_INTERFACE, {
            "SAI_ROUTER_INTERFACE_ATTR_VIRTUAL_ROUTER_ID": sai.default_vr,
            "SAI_ROUTER_INTERFACE_ATTR_TYPE": "SAI_ROUTER_INTERFACE_TYPE_PORT",
            "SAI_ROUTER_INTERFACE_ATTR_PORT_ID": port})
        o.rif_by_ifindex[lane] = rif  # type: ignore[assignment]
    return o, backend


def feed(o: RouteOrch, *messages: bytes) -> None:
    reader = FpmReader()
    stream = frame(b"".join(messages))
    events = [e for half in (stream[:7], stream[7:]) for p in reader.feed(half) for e in decode(p)]
    o.apply(events)


def ecmp(o: RouteOrch, *messages: bytes) -> None:
    feed(o, nexthop(1, "10.1.0.1", ETH1), nexthop(2, "10.1.0.3", ETH2),
         nexthop(3, group=[(1, 1), (2, 3)]), *messages)


def test_fpm_frames_split_across_reads_and_bad_headers() -> None:
    reader = FpmReader()
    data = frame(route("10.0.0.4/32", 7)) + frame(route("10.0.0.5/32", delete=True))
    payloads = [p for chunk in (data[:3], data[3:30], data[30:]) for p in reader.feed(chunk)]
    assert [type(e) for p in payloads for e in decode(p)] == [RouteUpdate, RouteDelete]
    with pytest.raises(FpmError):
        list(FpmReader().feed(b"\x07\x01\x00\x08abcd"))


def test_decode_inline_and_blackhole_routes() -> None:
    (inline,) = decode(inline_route("10.5.0.0/24", "10.1.0.1", ETH1))
    assert inline == RouteUpdate(IpPrefix.parse("10.5.0.0/24"), hops=(Hop("10.1.0.1", ETH1),),
                                 protocol=186)
    (hole,) = decode(route("10.6.0.0/24", blackhole=True))
    assert hole.blackhole  # type: ignore[union-attr]


def test_weighted_ecmp_route_becomes_a_group_with_members(orch) -> None:
    o, _ = orch
    ecmp(o, route("10.0.0.4/32", 3))
    (group,) = o.sai.objects(T.NEXT_HOP_GROUP)
    weights = {o.sai.record(m.next_hop_id).ip.exploded: m.weight  # type: ignore[union-attr]
               for m in o.sai.members(group).values()}  # type: ignore[arg-type]
    assert weights == {"10.1.0.1": 1, "10.1.0.3": 3}
    assert o.programmed[IpPrefix.parse("10.0.0.4/32")][0] == "group"


def test_group_change_moves_routes_without_withdrawing_them(orch) -> None:
    o, backend = orch
    ecmp(o, route("10.0.0.4/32", 3), route("10.0.0.6/32", 3))
    backend.calls.clear()
    feed(o, nexthop(3, group=[(1, 1)]))  # zebra shrinks the group in place
    routes = [c for c in backend.calls if c[0] != "create" and not isinstance(c[1], int)]
    assert routes and all(api == "set" for api, _ in routes)
    assert o.sai.count(T.NEXT_HOP_GROUP) == 0  # the old group was collected
    assert {t for t in o.programmed.values()} == {("nh", ("10.1.0.1", o.rif_by_ifindex[ETH1]))}


def test_delete_then_add_in_one_batch_is_one_set(orch) -> None:
    o, backend = orch
    ecmp(o, route("10.0.0.4/32", 1))
    backend.calls.clear()
    feed(o, route("10.0.0.4/32", delete=True), route("10.0.0.4/32", 2))
    assert [api for api, ref in backend.calls if not isinstance(ref, int)] == ["set"]


def test_withdraw_removes_the_route_and_unused_next_hops(orch) -> None:
    o, _ = orch
    ecmp(o, route("10.0.0.4/32", 3))
    feed(o, route("10.0.0.4/32", delete=True))
    assert o.sai.count(T.ROUTE_ENTRY) == 0
    assert o.sai.count(T.NEXT_HOP_GROUP) == o.sai.count(T.NEXT_HOP) == 0


def test_connected_blackhole_and_non_port_routes(orch) -> None:
    o, _ = orch
    feed(o, nexthop(5, None, ETH1), nexthop(6, None, 1), route("10.1.0.0/31", 5),
         route("10.0.0.3/32", 6), route("10.7.0.0/24", blackhole=True))
    routes = {str(k.destination): r for k, r in o.sai.objects(T.ROUTE_ENTRY).items()}
    assert routes["10.1.0.0/31"].next_hop_id == o.rif_by_ifindex[ETH1]  # type: ignore[attr-defined]
    assert routes["10.7.0.0/24"].packet_action == "SAI_PACKET_ACTION_DROP"  # type: ignore[attr-defined]
    assert "10.0.0.3/32" not in routes
    assert "not a port" in o.skipped[IpPrefix.parse("10.0.0.3/32")]


def test_failed_routes_are_retried_once_the_fault_is_gone(orch) -> None:
    o, _ = orch
    o.sai.faults.add("create", "ROUTE_ENTRY", 1.0)
    ecmp(o, route("10.0.0.4/32", 1), route("10.0.0.5/32", 2))
    assert set(map(str, o.failed)) == {"10.0.0.4/32", "10.0.0.5/32"}
    assert o.sai.count(T.NEXT_HOP) == 0  # nothing left behind
    o.sai.faults.clear()
    o.retry()
    assert not o.failed and o.sai.count(T.ROUTE_ENTRY) == 2


def test_table_full_keeps_the_excess_failed(orch) -> None:
    o, _ = orch
    o.sai.capacity = o.sai.capacity.shrunk(T.ROUTE_ENTRY, 2)
    ecmp(o, *(route(f"10.0.0.{i}/32", 1) for i in range(4)))
    assert o.sai.count(T.ROUTE_ENTRY) == 2
    assert set(o.failed.values()) == {str(Status.TABLE_FULL)}


def test_warm_replay_writes_nothing_and_sweeps_what_zebra_dropped(orch) -> None:
    o, backend = orch
    ecmp(o, route("10.0.0.4/32", 3), route("10.0.0.5/32", 1), route("10.0.0.9/32", 2))
    # a new agent over the same "hardware": same SAI objects, fresh orchestration state
    fresh = RouteOrch(o.sai, rif_by_ifindex=o.rif_by_ifindex)
    fresh.adopt()
    backend.calls.clear()
    ecmp(fresh, route("10.0.0.4/32", 3), route("10.0.0.5/32", 1))  # zebra's replay
    assert backend.calls == []
    assert fresh.sweep_stale() == 1
    assert {api for api, _ in backend.calls} == {"remove"}
    assert set(map(str, fresh.programmed)) == {"10.0.0.4/32", "10.0.0.5/32"}


def test_a_claimed_route_is_programmed_pinned_and_never_on_zebras_path(orch) -> None:
    """A TE policy claims a route zebra brings inside its prefix before it is programmed:
    one create, with the configured next hop; zebra's later word waits for the unpin."""
    o, backend = orch
    _, configured = o.sai.create(T.NEXT_HOP, {
        "SAI_NEXT_HOP_ATTR_TYPE": "SAI_NEXT_HOP_TYPE_IP", "SAI_NEXT_HOP_ATTR_IP": "10.1.0.3",
        "SAI_NEXT_HOP_ATTR_ROUTER_INTERFACE_ID": o.rif_by_ifindex[ETH2]})
    host, other = IpPrefix.parse("10.0.0.4/32"), IpPrefix.parse("10.9.0.4/32")

    def claim(prefix: IpPrefix) -> bool:
        return prefix == host and o.pin(prefix, {NEXT_HOP_ID: configured}).ok

    o.claim = claim
    backend.calls.clear()
    ecmp(o, route("10.0.0.4/32", 1), route("10.9.0.4/32", 1))
    creates = [ref for api, ref in backend.calls if api == "create" and not isinstance(ref, int)]
    assert len(creates) == 2 and o.programmed[host] == ("config", configured)
    assert o.programmed[other][0] == "nh" and o.wanted[host].nh_id == 1
    o.unpin(host)
    assert o.programmed[host] == ("nh", ("10.1.0.1", o.rif_by_ifindex[ETH1]))
