"""Decode zebra's FPM netlink messages into route and nexthop events.

zebra 8.4 with `dplane_fpm_nl` sends nexthops as RTM_NEWNEXTHOP/RTM_DELNEXTHOP (next-hop
groups are on by default: `fpm use-next-hop-groups`) and routes as RTM_NEWROUTE with
RTA_NH_ID, or with inline RTA_GATEWAY/RTA_OIF/RTA_MULTIPATH when groups are turned off; both
forms are understood. Route messages are parsed by hand (they are the bulk of a FIB download);
nexthop messages go through the shared pyroute2 class.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

from harness.linux.rtnl_messages import (
    RTM_DELNEXTHOP,
    RTM_NEWNEXTHOP,
    RTN_BLACKHOLE,
    nhmsg,
    split_messages,
    unpack_address,
    unpack_group,
)
from harness.linux.rtnl_route import (
    RTA_DST,
    RTA_GATEWAY,
    RTA_MULTIPATH,
    RTA_NH_ID,
    RTA_OIF,
    RTA_TABLE,
    RTM_DELROUTE,
    RTM_NEWROUTE,
    RTMSG,
    attributes,
    multipath,
)
from harness.nodes.switch.sai.types import IpPrefix

RT_TABLE_MAIN = 254
_U32 = struct.Struct("=I")
RTN_UNREACHABLE, RTN_PROHIBIT = 7, 8


@dataclass(frozen=True)
class Hop:
    gateway: str | None  # None: directly connected out of `ifindex`
    ifindex: int
    weight: int = 1


@dataclass(frozen=True)
class NexthopUpdate:
    id: int
    hop: Hop | None = None
    group: tuple[tuple[int, int], ...] = ()
    blackhole: bool = False


@dataclass(frozen=True)
class NexthopDelete:
    id: int


# Route events are built once per route of a FIB download: slots and not frozen, as frozen
# dataclasses take three times as long to build. Nothing changes them once decoded. Their
# prefix stays packed (IpPrefix): text is made only where a prefix is shown.
@dataclass(slots=True)
class RouteUpdate:
    prefix: IpPrefix
    nh_id: int = 0
    hops: tuple[Hop, ...] = ()
    blackhole: bool = False
    protocol: int = 0


@dataclass(slots=True)
class RouteDelete:
    prefix: IpPrefix


Event = NexthopUpdate | NexthopDelete | RouteUpdate | RouteDelete


def _prefix(family: int, dst: bytes | None, dst_len: int) -> IpPrefix:
    size = 4 if family == socket.AF_INET else 16
    host_bits = size * 8 - dst_len
    if host_bits or dst is None or len(dst) != size:
        # zebra sends network addresses; host bits are cleared all the same
        value = int.from_bytes(dst or bytes(size)) >> host_bits << host_bits
        dst = value.to_bytes(size)
    return IpPrefix(dst, dst_len)


def decode_route(msg_type: int, message: bytes) -> RouteUpdate | RouteDelete | None:
    family, dst_len, _src, _tos, table, protocol, _scope, rtype, _flags = \
        RTMSG.unpack_from(message, 16)
    values = attributes(message, 16 + RTMSG.size)
    if RTA_TABLE in values:
        (table,) = _U32.unpack(values[RTA_TABLE])
    if table != RT_TABLE_MAIN or family not in (socket.AF_INET, socket.AF_INET6):
        return None  # only the default VRF's table exists on this kernel (no VRF)
    prefix = _prefix(family, values.get(RTA_DST), dst_len)
    if msg_type == RTM_DELROUTE:
        return RouteDelete(prefix)
    if rtype in (RTN_BLACKHOLE, RTN_UNREACHABLE, RTN_PROHIBIT):
        return RouteUpdate(prefix, blackhole=True, protocol=protocol)
    if RTA_NH_ID in values:  # the common case: positional arguments are the fastest
        return RouteUpdate(prefix, _U32.unpack(values[RTA_NH_ID])[0], (), False, protocol)
    if RTA_MULTIPATH in values:
        return RouteUpdate(prefix, protocol=protocol, hops=tuple(
            Hop(unpack_address(h.gateway) if h.gateway else None, h.ifindex, h.weight)
            for h in multipath(values[RTA_MULTIPATH])))
    oif = _U32.unpack(values[RTA_OIF])[0] if RTA_OIF in values else 0
    gateway = unpack_address(values[RTA_GATEWAY]) if RTA_GATEWAY in values else None
    return RouteUpdate(prefix, hops=(Hop(gateway, oif),), protocol=protocol)


def decode_nexthop(msg_type: int, message: bytes) -> NexthopUpdate | NexthopDelete:
    msg = nhmsg(message)
    msg.decode()
    nh_id = msg.get_attr("NHA_ID")
    if msg_type == RTM_DELNEXTHOP:
        return NexthopDelete(nh_id)
    group = msg.get_attr("NHA_GROUP")
    if group:
        return NexthopUpdate(nh_id, group=tuple(unpack_group(group)))
    if msg.get_attr("NHA_BLACKHOLE") is not None:
        return NexthopUpdate(nh_id, blackhole=True)
    gateway = msg.get_attr("NHA_GATEWAY")
    return NexthopUpdate(nh_id, hop=Hop(unpack_address(gateway) if gateway else None,
                                        msg.get_attr("NHA_OIF") or 0))


def decode(payload: bytes) -> list[Event]:
    """Every event in one FPM frame's netlink payload, in order."""
    events: list[Event] = []
    for msg_type, _flags, message in split_messages(payload):
        if msg_type in (RTM_NEWROUTE, RTM_DELROUTE):
            route = decode_route(msg_type, message)
            if route is not None:
                events.append(route)
        elif msg_type in (RTM_NEWNEXTHOP, RTM_DELNEXTHOP):
            events.append(decode_nexthop(msg_type, message))
    return events
