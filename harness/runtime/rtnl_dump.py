"""Host routes of one table, from a route dump parsed by hand.

Convergence reads every node's FIB each poll: on fpf-64 that is ~25k routes a poll, which
pyroute2's message objects parse at ~100 us each (seconds of the deploy's CPU). Only the
destination of /32 and /128 routes is needed, so the dump is walked with struct instead.
"""

from __future__ import annotations

import socket
import struct

from harness.runtime.nsenter import rtnl_socket
from harness.runtime.rtnl_batch import NLMSGHDR, split

RTM_GETROUTE, RTM_NEWROUTE, NLMSG_DONE, NLMSG_ERROR = 26, 24, 3, 2
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
RTA_DST, RTA_TABLE = 1, 15
_RTMSG = struct.Struct("=BBBBBBBBI")  # family, dst_len, src_len, tos, table, proto, scope, type
_RTATTR = struct.Struct("=HH")
_U32 = struct.Struct("=I")
HOST_LEN = {socket.AF_INET: 32, socket.AF_INET6: 128}


def _host_destination(body: bytes, table: int) -> str | None:
    family, dst_len, _, _, rtm_table = _RTMSG.unpack_from(body)[:5]
    if HOST_LEN.get(family) != dst_len:
        return None
    dst, offset = None, _RTMSG.size
    while offset + _RTATTR.size <= len(body):
        length, kind = _RTATTR.unpack_from(body, offset)
        if length < _RTATTR.size:
            break
        value = body[offset + _RTATTR.size:offset + length]
        if kind == RTA_DST:
            dst = value
        elif kind == RTA_TABLE:
            rtm_table = _U32.unpack(value)[0]
        offset += (length + 3) & ~3
    if rtm_table != table or dst is None:
        return None
    return f"{socket.inet_ntop(family, dst)}/{dst_len}"


def host_routes(netns_path: str, table: int) -> set[str]:
    """`addr/32` and `addr/128` destinations of `table` in the namespace, both families."""
    with rtnl_socket(netns_path) as sock:
        found: set[str] = set()
        for seq, family in enumerate((socket.AF_INET, socket.AF_INET6), start=1):
            request = _RTMSG.pack(family, 0, 0, 0, 0, 0, 0, 0, 0)
            sock.send(NLMSGHDR.pack(NLMSGHDR.size + len(request), RTM_GETROUTE,
                                     NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + request)
            done = False
            while not done:
                for kind, _, body in split(sock.recv(1 << 20)):
                    if kind == NLMSG_ERROR and _U32.unpack_from(body)[0]:
                        raise OSError(-struct.unpack_from("=i", body)[0], "route dump failed")
                    done |= kind in (NLMSG_DONE, NLMSG_ERROR)
                    if kind == RTM_NEWROUTE and (dst := _host_destination(body, table)):
                        found.add(dst)
        return found
