"""Netlink messages pyroute2 0.9 lacks, sent to the kernel over harness/linux/rtnl_channel.py.

pyroute2 0.9 has no nexthop-object message (`nhmsg`, RTM_NEWNEXTHOP) and its route message
stops before RTA_NH_ID; both are needed for routes that point at kernel nexthop objects, which
is what a SAI next hop / next-hop group maps to. The message classes below extend pyroute2's
own, so FPM decoding (zebra sends the same messages) and kernel programming share them.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable, Iterator
from ipaddress import IPv6Address, ip_address
from typing import Any

from pyroute2.netlink import NLM_F_REQUEST, nlmsg
from pyroute2.netlink.rtnl.rtmsg import rtmsg

from harness.linux.rtnl_batch import RTATTR
from harness.linux.rtnl_route import (
    RTA_DST,
    RTA_GATEWAY,
    RTA_NH_ID,
    RTA_OIF,
    RTA_TABLE,
    RTM_NEWROUTE,
)

RTM_NEWNEXTHOP, RTM_DELNEXTHOP, RTM_GETNEXTHOP = 104, 105, 106
NLM_F_REPLACE, NLM_F_EXCL, NLM_F_CREATE = 0x100, 0x200, 0x400
NHA_ID, NHA_GROUP, NHA_BLACKHOLE, NHA_OIF, NHA_GATEWAY = 1, 2, 4, 5, 6
LWTUNNEL_ENCAP_SEG6 = 5
# seg6_iptunnel.h's modes, by the SAI SID list type that asks for each
SEG6_IPTUN_MODES = {"SAI_SRV6_SIDLIST_TYPE_INSERT": 0, "SAI_SRV6_SIDLIST_TYPE_ENCAPS": 1,
                    "SAI_SRV6_SIDLIST_TYPE_ENCAPS_RED": 3}
_GROUP_ENTRY = struct.Struct("=IBBH")  # struct nexthop_grp: id, weight-1, resvd1, resvd2


class nhmsg(nlmsg):
    """struct nhmsg + NHA_* attributes (include/uapi/linux/nexthop.h)."""

    fields = (("family", "B"), ("scope", "B"), ("protocol", "B"), ("resvd", "B"),
              ("flags", "I"))
    nla_map = ((0, "NHA_UNSPEC", "none"), (1, "NHA_ID", "uint32"), (2, "NHA_GROUP", "cdata"),
               (3, "NHA_GROUP_TYPE", "uint16"), (4, "NHA_BLACKHOLE", "flag"),
               (5, "NHA_OIF", "uint32"), (6, "NHA_GATEWAY", "cdata"),
               (7, "NHA_ENCAP_TYPE", "uint16"), (8, "NHA_ENCAP", "cdata"),
               (0x8008, "NHA_ENCAP_NESTED", "cdata"))  # the kernel wants NLA_F_NESTED


class rtmsg_nh(rtmsg):
    """pyroute2's rtmsg, extended up to RTA_NH_ID (30).

    pyroute2 compiles a message class's NLA map once and keeps it in class attributes a
    subclass inherits: without the reset below, rtmsg_nh would reuse rtmsg's map (and
    silently drop RTA_NH_ID) whenever plain rtmsg happened to be used first.
    """

    _nlmsg_base__compiled_nla = False
    _nlmsg_base__t_nla_map = None
    _nlmsg_base__r_nla_map = None

    nla_map = (*((i, name, kind) for i, (name, kind) in enumerate(rtmsg.nla_map)),
               (24, "RTA_PAD", "hex"), (25, "RTA_UID", "uint32"),
               (26, "RTA_TTL_PROPAGATE", "uint8"), (27, "RTA_IP_PROTO", "uint8"),
               (28, "RTA_SPORT", "uint16"), (29, "RTA_DPORT", "uint16"),
               (30, "RTA_NH_ID", "uint32"))


def pack_group(members: list[tuple[int, int]]) -> bytes:
    """NHA_GROUP payload from (nexthop id, weight 1..256) pairs; the kernel stores weight-1."""
    return b"".join(_GROUP_ENTRY.pack(nh, weight - 1, 0, 0) for nh, weight in members)


def unpack_group(data: bytes) -> list[tuple[int, int]]:
    return [(nh, weight + 1) for nh, weight, _, _ in _GROUP_ENTRY.iter_unpack(data)]


def pack_address(ip: str) -> bytes:
    address = ip_address(ip)
    return socket.inet_pton(socket.AF_INET6 if address.version == 6 else socket.AF_INET,
                            str(address))


def unpack_address(data: bytes) -> str:
    return socket.inet_ntop(socket.AF_INET6 if len(data) == 16 else socket.AF_INET, data)


def pack_seg6_encap(segments: tuple[IPv6Address, ...], sid_list_type: str) -> bytes:
    """NHA_ENCAP for `encap seg6 mode encap|encap.red|inline segs ...`: a nested
    SEG6_IPTUNNEL_SRH attribute.

    The SRH lists segments last-first (RFC 8754), so the first SID is segments[n-1]. Inline
    (H.Insert) keeps Segment List[0] for the packet's own destination, which the kernel
    writes there; a reduced encapsulation is given the whole list and reduces it itself.
    """
    listed = tuple(reversed(segments))
    if sid_list_type == "SAI_SRV6_SIDLIST_TYPE_INSERT":
        listed = (IPv6Address(0), *listed)
    n = len(listed)
    srh = struct.pack("=BBBBBBH", 0, 2 * n, 4, n - 1, n - 1, 0, 0)
    srh += b"".join(s.packed for s in listed)
    payload = struct.pack("=i", SEG6_IPTUN_MODES[sid_list_type]) + srh
    return RTATTR.pack(4 + len(payload), 1) + payload


def unpack_seg6_encap(data: bytes) -> tuple[tuple[IPv6Address, ...], str]:
    """What pack_seg6_encap packed, read back from a dumped nexthop: (segments, SID list type)."""
    mode, = struct.unpack_from("=i", data, 4)
    last = data[8 + 4]
    listed = [IPv6Address(data[16 + 16 * i:32 + 16 * i]) for i in range(last + 1)]
    sid_list_type = next(t for t, m in SEG6_IPTUN_MODES.items() if m == mode)
    if sid_list_type == "SAI_SRV6_SIDLIST_TYPE_INSERT":
        listed = listed[1:]
    return tuple(reversed(listed)), sid_list_type


_RTMSG = struct.Struct("=IHHIIBBBBBBBBI")  # nlmsghdr + struct rtmsg
_U32_ATTR = struct.Struct("=HHI")
_FAMILY_OF_SIZE = {4: socket.AF_INET, 16: socket.AF_INET6}
_DST_HEADER = {size: RTATTR.pack(4 + size, RTA_DST) for size in _FAMILY_OF_SIZE}
RTN_UNICAST, RTN_BLACKHOLE = 1, 6
RT_SCOPE_UNIVERSE, RT_SCOPE_LINK = 0, 253


def route_encoder(msg_type: int, flags: int, table: int, proto: int, *, nh_id: int = 0,
                  oif: int = 0, gateway: bytes = b"", blackhole: bool = False
                  ) -> Callable[[int, bytes, int], bytes]:
    """Route requests packed by hand: the hot path of a FIB download (10k routes/s and up),
    where building pyroute2 message objects would cost more than the kernel does. What the
    destination does not change is packed once; the returned function takes (sequence
    number, destination bytes, prefix length), as a download sends thousands of routes to
    one next hop. Requests carry no NLM_F_ACK: send_acked asks for the acks."""
    tail = _U32_ATTR.pack(8, RTA_TABLE, table)
    rtype, scope = RTN_UNICAST, RT_SCOPE_UNIVERSE
    if msg_type == RTM_NEWROUTE:
        if blackhole:
            rtype = RTN_BLACKHOLE
        elif nh_id:
            tail += _U32_ATTR.pack(8, RTA_NH_ID, nh_id)
        elif gateway:
            tail += RTATTR.pack(4 + len(gateway), RTA_GATEWAY) + gateway
            tail += _U32_ATTR.pack(8, RTA_OIF, oif)
        else:
            tail += _U32_ATTR.pack(8, RTA_OIF, oif)
            scope = RT_SCOPE_LINK
    flags |= NLM_F_REQUEST
    fixed = 28 + 4 + len(tail)  # headers, RTA_DST's own header, the packed tail
    table_byte = min(table, 255)  # rtm_table; RTA_TABLE holds the whole number

    def encode(seq: int, dst: bytes, dst_len: int) -> bytes:
        size = len(dst)
        return b"".join((_RTMSG.pack(fixed + size, msg_type, flags, seq, 0,
                                     _FAMILY_OF_SIZE[size], dst_len, 0, 0, table_byte, proto,
                                     scope, rtype, 0),
                         _DST_HEADER[size], dst, tail))
    return encode


def route_message(msg_type: int, flags: int, seq: int, dst: bytes, dst_len: int, table: int,
                  proto: int, **target: Any) -> bytes:
    """One route request (see route_encoder for the arguments naming its target)."""
    return route_encoder(msg_type, flags, table, proto, **target)(seq, dst, dst_len)


def split_messages(data: bytes) -> Iterator[tuple[int, int, bytes]]:
    """(type, flags, whole message) for each netlink message in a buffer (FPM frames)."""
    offset = 0
    while offset + 16 <= len(data):
        length, msg_type, flags = struct.unpack_from("=IHH", data, offset)
        if length < 16:
            break
        yield msg_type, flags, data[offset:offset + length]
        offset += (length + 3) & ~3

