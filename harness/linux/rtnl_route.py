"""Route messages read by hand: zebra's FPM stream, the kernel's route events and dumps.

pyroute2's message objects parse at ~100 us each. Routes are read in bulk (a FIB download,
every node's FIB at each convergence poll: ~25k routes on fpf-64, a host's spray agent
following the main table), and only a few fields are wanted, so the messages are walked
with struct instead.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from typing import NamedTuple

from harness.linux.nsenter import rtnl_socket
from harness.linux.rtnl_batch import RTATTR, dump

RTM_NEWROUTE, RTM_DELROUTE, RTM_GETROUTE = 24, 25, 26
RTA_DST, RTA_OIF, RTA_GATEWAY, RTA_MULTIPATH, RTA_TABLE, RTA_NH_ID = 1, 4, 5, 9, 15, 30
RTMSG = struct.Struct("=BBBBBBBBI")  # family, dst_len, src_len, tos, table, proto, scope, type
_U32 = struct.Struct("=I")
_RTNH = struct.Struct("=HBBi")  # struct rtnexthop: len, flags, hops (weight - 1), ifindex
HOST_LEN = {socket.AF_INET: 32, socket.AF_INET6: 128}


class NextHop(NamedTuple):
    ifindex: int
    gateway: bytes | None  # None: directly connected out of `ifindex`
    weight: int = 1
    flags: int = 0  # RTNH_F_*: a dead or link-down next hop is still listed


def attributes(data: bytes, offset: int) -> dict[int, bytes]:
    """Type -> payload of the netlink attributes from `offset` on."""
    values = {}
    while offset + 4 <= len(data):
        length, kind = RTATTR.unpack_from(data, offset)
        if length < 4:
            break
        values[kind & 0x3FFF] = data[offset + 4:offset + length]
        offset += (length + 3) & ~3
    return values


def multipath(data: bytes) -> list[NextHop]:
    """The next hops of an RTA_MULTIPATH payload."""
    hops, offset = [], 0
    while offset + _RTNH.size <= len(data):
        length, flags, weight, ifindex = _RTNH.unpack_from(data, offset)
        gateway = attributes(data[offset:offset + length], _RTNH.size).get(RTA_GATEWAY)
        hops.append(NextHop(ifindex, gateway, weight + 1, flags))
        offset += (length + 3) & ~3
    return hops


def next_hops(values: dict[int, bytes], flags: int = 0) -> list[NextHop]:
    """A route's next hops, from RTA_MULTIPATH or from its single RTA_OIF/RTA_GATEWAY (whose
    flags are the route's own `flags`); a route to a nexthop object also lists them this way
    in kernel messages (net.ipv4.nexthop_compat_mode), though not in zebra's."""
    if RTA_MULTIPATH in values:
        return multipath(values[RTA_MULTIPATH])
    if RTA_OIF not in values and RTA_GATEWAY not in values:
        return []
    oif = _U32.unpack(values[RTA_OIF])[0] if RTA_OIF in values else 0
    return [NextHop(oif, values.get(RTA_GATEWAY), 1, flags)]


def table_of(rtm_table: int, values: dict[int, bytes]) -> int:
    """A table above 255 is in RTA_TABLE, with rtm_table = RT_TABLE_COMPAT."""
    return _U32.unpack(values[RTA_TABLE])[0] if RTA_TABLE in values else rtm_table


def dump_routes(sock: socket.socket) -> Iterator[tuple[int, bytes]]:
    """(type, body after the netlink header) of every route the namespace has, both
    families, on a netlink socket opened there."""
    for seq, family in enumerate((socket.AF_INET, socket.AF_INET6), start=1):
        yield from dump(sock, RTM_GETROUTE, RTMSG.pack(family, 0, 0, 0, 0, 0, 0, 0, 0), seq)


def host_routes(netns_path: str, table: int) -> set[str]:
    """`addr/32` and `addr/128` destinations of `table` in the namespace, both families."""
    found: set[str] = set()
    with rtnl_socket(netns_path) as sock:
        for _, body in dump_routes(sock):
            family, dst_len, _, _, rtm_table = RTMSG.unpack_from(body)[:5]
            if HOST_LEN.get(family) != dst_len:
                continue
            values = attributes(body, RTMSG.size)
            if table_of(rtm_table, values) == table and RTA_DST in values:
                found.add(f"{socket.inet_ntop(family, values[RTA_DST])}/{dst_len}")
    return found
