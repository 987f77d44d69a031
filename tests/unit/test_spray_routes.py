"""The spray agent reads the kernel's route messages by hand: what it takes from them, checked
against messages pyroute2 encodes."""

from __future__ import annotations

from pyroute2.netlink.rtnl.rtmsg import rtmsg

from harness.spray.agent import RTNH_F_DEAD, RTNH_F_LINKDOWN, host_route

PLANES = {10: 0, 11: 1, 12: 2}  # ifindex -> plane of the host's NICs


def body(family: int, dst: str, dst_len: int, attrs: list, *, table: int = 254,
         flags: int = 0) -> bytes:
    msg = rtmsg()
    msg["family"], msg["dst_len"], msg["table"], msg["flags"] = family, dst_len, table, flags
    msg["attrs"] = [("RTA_DST", dst), *attrs]
    msg.encode()
    return msg.data[16:]  # after the netlink header, as the agent's reader hands it over


def hop(ifindex: int, gateway: str, flags: int = 0) -> dict:
    return {"oif": ifindex, "flags": flags, "hops": 0, "attrs": [("RTA_GATEWAY", gateway)]}


def test_multipath_keeps_the_live_next_hops_on_nics_by_plane():
    route = body(2, "10.0.0.7", 32, [("RTA_MULTIPATH", [
        hop(10, "10.1.0.1"), hop(11, "10.1.0.3", RTNH_F_DEAD), hop(12, "10.1.0.5"),
        hop(3, "10.9.0.1")])])
    assert host_route(route, PLANES) == ("10.0.0.7", {0: "10.1.0.1", 2: "10.1.0.5"})


def test_a_single_path_route_carries_its_next_hop_flags_in_the_route():
    up = body(10, "fd00::7", 128, [("RTA_OIF", 11), ("RTA_GATEWAY", "fe80::1")])
    down = body(10, "fd00::7", 128, [("RTA_OIF", 11), ("RTA_GATEWAY", "fe80::1")],
                flags=RTNH_F_LINKDOWN)
    assert host_route(up, PLANES) == ("fd00::7", {1: "fe80::1"})
    assert host_route(down, PLANES) == ("fd00::7", {})


def test_other_tables_and_prefixes_are_not_host_routes():
    plane_table = body(2, "10.0.0.7", 32, [("RTA_TABLE", 1001), ("RTA_OIF", 10),
                                           ("RTA_GATEWAY", "10.1.0.1")], table=252)
    subnet = body(2, "10.0.0.0", 24, [("RTA_OIF", 10), ("RTA_GATEWAY", "10.1.0.1")])
    assert host_route(plane_table, PLANES) is None and host_route(subnet, PLANES) is None

