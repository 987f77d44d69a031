"""The kernel backend against a bare namespace: every SAI object lands where the docstring says."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
from collections.abc import Iterator
from ipaddress import IPv6Address

import pytest
from pyroute2.netlink import NETLINK_ADD_MEMBERSHIP, SOL_NETLINK
from pyroute2.netlink.rtnl import RTMGRP_IPV4_ROUTE

from harness.linux.features import feature, has
from harness.linux.nsenter import NETNS_RUN_DIR, rtnl_socket
from harness.linux.rtnl_batch import split
from harness.linux.rtnl_messages import RTM_DELNEXTHOP
from harness.linux.rtnl_route import RTM_DELROUTE
from harness.linux.scratch import scratch_name, scratch_netns
from harness.nodes.switch.sai.api import SaiSwitch
from harness.nodes.switch.sai.kernel import SAI_TABLE, KernelBackend
from harness.nodes.switch.sai.status import Status
from harness.nodes.switch.sai.types import IpPrefix, MySidKey, NeighborKey, ObjectType, RouteKey

pytestmark = pytest.mark.e2e
T = ObjectType
RTNLGRP_NEXTHOP = 32  # uapi rtnetlink.h; pyroute2 does not name it
NETNS = scratch_name("sai-kernel")


def sh(*argv: str) -> str:
    return subprocess.run(["ip", "netns", "exec", NETNS, *argv], capture_output=True, text=True,
                          check=True).stdout


@pytest.fixture
def netns() -> Iterator[str]:
    with scratch_netns("sai-kernel") as name:
        for cmd in (["ip", "link", "add", "eth1", "type", "veth", "peer", "name", "peer1"],
                    ["ip", "link", "set", "eth1", "up"], ["ip", "link", "set", "peer1", "up"],
                    ["ip", "addr", "add", "10.1.0.0/31", "dev", "eth1"],
                    ["ip", "-6", "addr", "add", "fd00:1::/127", "dev", "eth1", "nodad"],
                    ["ip", "rule", "add", "pref", "1000", "lookup", str(SAI_TABLE)]):
            sh(*cmd)
        yield f"{NETNS_RUN_DIR}/{name}"


def switch(path: str, warm: bool = False) -> tuple[SaiSwitch, int, int]:
    sw = SaiSwitch(KernelBackend(path), attrs={"SAI_SWITCH_ATTR_INIT_SWITCH": True,
                                              "SAI_SWITCH_ATTR_RESTART_WARM": warm})
    lane = int(sh("cat", "/sys/class/net/eth1/ifindex"))
    _, port = sw.create(T.PORT, {"SAI_PORT_ATTR_HW_LANE_LIST": [lane]})
    _, rif = sw.create(T.ROUTER_INTERFACE, {
        "SAI_ROUTER_INTERFACE_ATTR_VIRTUAL_ROUTER_ID": sw.default_vr,
        "SAI_ROUTER_INTERFACE_ATTR_TYPE": "SAI_ROUTER_INTERFACE_TYPE_PORT",
        "SAI_ROUTER_INTERFACE_ATTR_PORT_ID": port})
    return sw, port, rif  # type: ignore[return-value]


def hop(sw: SaiSwitch, rif: int, ip: str) -> int:
    status, oid = sw.create(T.NEXT_HOP, {"SAI_NEXT_HOP_ATTR_TYPE": "SAI_NEXT_HOP_TYPE_IP",
                                         "SAI_NEXT_HOP_ATTR_IP": ip,
                                         "SAI_NEXT_HOP_ATTR_ROUTER_INTERFACE_ID": rif})
    assert status.ok, status
    return oid  # type: ignore[return-value]


def route_and_nexthop_events(netns_path: str) -> socket.socket:
    """A netlink socket in the namespace that hears every IPv4 route and nexthop change."""
    sock = rtnl_socket(netns_path)
    sock.bind((0, RTMGRP_IPV4_ROUTE))
    sock.setsockopt(SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, RTNLGRP_NEXTHOP)
    return sock


def heard(sock: socket.socket) -> list[int]:
    """Message types queued on the socket (the kernel queues them as it makes the change)."""
    kinds = []
    sock.setblocking(False)
    with contextlib.suppress(BlockingIOError):
        while True:
            kinds += [kind for kind, _, _ in split(sock.recv(1 << 16))]
    return kinds


def sai_routes(family: str = "-4") -> list[dict]:
    return json.loads(sh("ip", "-j", family, "route", "show", "table", str(SAI_TABLE)) or "[]")


def test_weighted_group_routes_by_nexthop_id_and_rebuilds(netns: str) -> None:
    sw, _, rif = switch(netns)
    a, b = hop(sw, rif, "10.1.0.1"), hop(sw, rif, "10.1.0.1")  # two objects, one gateway
    assert a != b
    _, group = sw.create(T.NEXT_HOP_GROUP, {"SAI_NEXT_HOP_GROUP_ATTR_TYPE":
                                            "SAI_NEXT_HOP_GROUP_TYPE_ECMP"})
    key = RouteKey(sw.default_vr, IpPrefix.parse("10.9.0.0/24"))
    assert sw.create(T.ROUTE_ENTRY, {"SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID": group}, key=key)[0].ok
    assert sai_routes()[0]["type"] == "blackhole"  # an empty group drops
    for nh, weight in ((a, 1), (b, 3)):
        assert sw.create(T.NEXT_HOP_GROUP_MEMBER, {
            "SAI_NEXT_HOP_GROUP_MEMBER_ATTR_NEXT_HOP_GROUP_ID": group,
            "SAI_NEXT_HOP_GROUP_MEMBER_ATTR_NEXT_HOP_ID": nh,
            "SAI_NEXT_HOP_GROUP_MEMBER_ATTR_WEIGHT": weight})[0].ok
    (entry,) = sai_routes()
    groups = json.loads(sh("ip", "-j", "nexthop", "show", "id", str(entry["nhid"])))
    assert sorted(m.get("weight", 1) for m in groups[0]["group"]) == [1, 3]
    assert entry["protocol"] in ("250", 250)
    assert sh("ip", "route", "get", "10.9.0.7").startswith("10.9.0.7 via 10.1.0.1 dev eth1")
    assert sw.remove(a) is Status.OBJECT_IN_USE


def test_connected_drop_neighbor_and_port_state(netns: str) -> None:
    sw, port, rif = switch(netns)
    vr = sw.default_vr
    assert sw.create(T.ROUTE_ENTRY, {"SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID": rif},
                     key=RouteKey(vr, IpPrefix.parse("10.1.0.0/31")))[0].ok
    assert sw.create(T.ROUTE_ENTRY, {"SAI_ROUTE_ENTRY_ATTR_PACKET_ACTION":
                                     "SAI_PACKET_ACTION_DROP"},
                     key=RouteKey(vr, IpPrefix.parse("10.66.0.0/16")))[0].ok
    routes = {r["dst"]: r for r in sai_routes()}
    assert routes["10.1.0.0/31"]["dev"] == "eth1" and routes["10.66.0.0/16"]["type"] == "blackhole"
    assert sw.create(T.NEIGHBOR_ENTRY, {"SAI_NEIGHBOR_ENTRY_ATTR_DST_MAC_ADDRESS":
                                        "02:00:00:00:00:01"},
                     key=NeighborKey(rif, "10.1.0.1"))[0].ok
    assert "02:00:00:00:00:01 PERMANENT" in sh("ip", "neigh", "show", "10.1.0.1")
    assert sw.set(port, "SAI_PORT_ATTR_ADMIN_STATE", False).ok
    assert "state DOWN" in sh("ip", "link", "show", "eth1")
    assert sw.set(port, "SAI_PORT_ATTR_ADMIN_STATE", True).ok
    sh("tc", "qdisc", "add", "dev", "eth1", "root", "pfifo")  # veths have no queue by default
    subprocess.run(["ip", "netns", "exec", NETNS, "ping", "-c", "3", "-i", "0.1", "-W", "1",
                    "10.1.0.1"], capture_output=True)  # to the static neighbor: no one answers
    status, stats = sw.get_port_stats(port)
    assert status.ok and stats["SAI_PORT_STAT_IF_OUT_UCAST_PKTS"] >= 3
    status, queues = sw.get_queue_stats(port)
    assert status.ok and queues and queues[0]["SAI_QUEUE_STAT_PACKETS"] >= 3


def srv6_next_hop(sw: SaiSwitch, rif: int) -> tuple[Status, int, int]:
    """A SID list and a next hop that encapsulates into it: (status, next hop, SID list)."""
    _, sids = sw.create(T.SRV6_SIDLIST, {"SAI_SRV6_SIDLIST_ATTR_SEGMENT_LIST":
                                         ["fc00:0:2::", "fc00:0:3::"]})
    status, hop = sw.create(T.NEXT_HOP, {
        "SAI_NEXT_HOP_ATTR_TYPE": "SAI_NEXT_HOP_TYPE_SRV6_SIDLIST",
        "SAI_NEXT_HOP_ATTR_SRV6_SIDLIST_ID": sids, "SAI_NEXT_HOP_ATTR_ROUTER_INTERFACE_ID": rif})
    return status, hop, sids


def test_without_the_kernels_srv6_the_objects_are_not_supported(netns: str) -> None:
    """A switch held to the kernel's SRv6 where the kernel has none (some cloud kernels; the
    agent takes the userspace path there, test_srv6_dataplane.py): SAI says so for an SRv6
    next hop, as an ASIC without SRv6 would, and the kernel is left as it was."""
    if has("seg6"):
        pytest.skip("this kernel has seg6: test_srv6_encap_and_my_sid_entries runs instead")
    sw, _, rif = switch(netns)
    status, _, _ = srv6_next_hop(sw, rif)
    assert status is Status.NOT_SUPPORTED, status
    assert "seg6" not in sh("ip", "-6", "route", "show", "table", "all")
    assert "encap" not in sh("ip", "nexthop", "show")


def test_srv6_encap_and_my_sid_entries(netns: str) -> None:
    if not (has("seg6") and has("seg6local")):
        pytest.skip(f"this kernel has no SRv6 ({feature('seg6').detail}): only the fallback "
                    "(test_without_the_kernels_srv6_the_objects_are_not_supported) runs here")
    sw, _, rif = switch(netns)
    status, te, sids = srv6_next_hop(sw, rif)
    assert status.ok, status
    assert sw.create(T.ROUTE_ENTRY, {"SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID": te},
                     key=RouteKey(sw.default_vr, IpPrefix.parse("fd00:99::/64")))[0].ok
    shown = sh("ip", "-6", "route", "show", "table", str(SAI_TABLE))
    assert "encap seg6 mode encap segs 2 [ fc00:0:2:: fc00:0:3:: ]" in shown
    x = hop(sw, rif, "fd00:1::1")
    assert sw.create(T.MY_SID_ENTRY, {
        "SAI_MY_SID_ENTRY_ATTR_ENDPOINT_BEHAVIOR": "SAI_MY_SID_ENTRY_ENDPOINT_BEHAVIOR_X",
        "SAI_MY_SID_ENTRY_ATTR_NEXT_HOP_ID": x},
        key=MySidKey(sw.default_vr, IPv6Address("fc00:0:1::1")))[0].ok
    assert "seg6local action End.X nh6 fd00:1::1 dev eth1" in sh(
        "ip", "-6", "route", "show", "table", str(SAI_TABLE), "fc00:0:1::1")
    assert sw.set(sids, "SAI_SRV6_SIDLIST_ATTR_SEGMENT_LIST", ["fc00:0:4::"]).ok
    assert "segs 1 [ fc00:0:4:: ]" in sh("ip", "-6", "route", "show", "table", str(SAI_TABLE))


def test_warm_start_reads_the_kernel_back_without_writing(netns: str) -> None:
    sw, _, rif = switch(netns)
    a = hop(sw, rif, "10.1.0.1")
    key = RouteKey(sw.default_vr, IpPrefix.parse("10.9.0.0/24"))
    assert sw.create(T.ROUTE_ENTRY, {"SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID": a}, key=key)[0].ok
    before = sh("ip", "route", "show", "table", str(SAI_TABLE))
    with route_and_nexthop_events(netns) as events:  # subscribed before anything can happen
        again, _, _ = switch(netns, warm=True)
        assert again.warm_adopt() == 2
        (adopted,) = again.objects(T.ROUTE_ENTRY).values()
        assert again.record(adopted.next_hop_id).ip.exploded == "10.1.0.1"  # type: ignore[attr-defined]
        assert again.remove(key).ok and again.remove(adopted.next_hop_id).ok  # type: ignore[attr-defined]
        assert before and heard(events) == [RTM_DELROUTE, RTM_DELNEXTHOP]  # only our removals
    assert sh("ip", "route", "show", "table", str(SAI_TABLE)) == ""
