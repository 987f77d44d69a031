"""Object types, object ids and the enumerated attribute values of the model.

Names follow SAI's headers (`SAI_OBJECT_TYPE_ROUTE_ENTRY`, `SAI_PACKET_ACTION_DROP`); the
numbers of object types are this model's own. An object id (OID) carries its type in the top
16 bits, as in SAI-VS, so a dump of any OID says what it is.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, fields
from enum import IntEnum
from ipaddress import IPv6Address, IPv6Network, ip_network
from typing import NamedTuple

OID_TYPE_SHIFT = 48
NULL_OID = 0


class ObjectType(IntEnum):
    SWITCH = 33
    PORT = 1
    VIRTUAL_ROUTER = 3
    NEXT_HOP = 4
    NEXT_HOP_GROUP = 5
    ROUTER_INTERFACE = 6
    NEIGHBOR_ENTRY = 19
    ROUTE_ENTRY = 20
    QUEUE = 21
    WRED = 22
    QOS_MAP = 23
    INGRESS_PRIORITY_GROUP = 26
    BUFFER_POOL = 27
    BUFFER_PROFILE = 29
    NEXT_HOP_GROUP_MEMBER = 45
    SRV6_SIDLIST = 87
    MY_SID_ENTRY = 88

    def __str__(self) -> str:
        return f"SAI_OBJECT_TYPE_{self.name}"


_TYPES_BY_NUMBER = {int(t): t for t in ObjectType}  # a dict lookup: ObjectType(n) is slow


def make_oid(kind: ObjectType, index: int) -> int:
    return (int(kind) << OID_TYPE_SHIFT) | index


def oid_type(oid: int) -> ObjectType | None:
    return _TYPES_BY_NUMBER.get(oid >> OID_TYPE_SHIFT)


def format_oid(oid: int) -> str:
    return f"oid:{oid:#x}"


# Enumerated attribute values, spelled as SAI spells them.
PACKET_ACTIONS = ("SAI_PACKET_ACTION_FORWARD", "SAI_PACKET_ACTION_DROP", "SAI_PACKET_ACTION_TRAP")
ROUTER_INTERFACE_TYPES = ("SAI_ROUTER_INTERFACE_TYPE_PORT", "SAI_ROUTER_INTERFACE_TYPE_LOOPBACK")
NEXT_HOP_TYPES = ("SAI_NEXT_HOP_TYPE_IP", "SAI_NEXT_HOP_TYPE_SRV6_SIDLIST")
NEXT_HOP_GROUP_TYPES = ("SAI_NEXT_HOP_GROUP_TYPE_ECMP",
                        "SAI_NEXT_HOP_GROUP_TYPE_DYNAMIC_UNORDERED_ECMP")
SRV6_SIDLIST_TYPES = ("SAI_SRV6_SIDLIST_TYPE_ENCAPS", "SAI_SRV6_SIDLIST_TYPE_ENCAPS_RED",
                      "SAI_SRV6_SIDLIST_TYPE_INSERT")
MY_SID_BEHAVIORS = ("SAI_MY_SID_ENTRY_ENDPOINT_BEHAVIOR_E", "SAI_MY_SID_ENTRY_ENDPOINT_BEHAVIOR_X",
                    "SAI_MY_SID_ENTRY_ENDPOINT_BEHAVIOR_DT6",
                    "SAI_MY_SID_ENTRY_ENDPOINT_BEHAVIOR_DT4",
                    "SAI_MY_SID_ENTRY_ENDPOINT_BEHAVIOR_DT46",
                    "SAI_MY_SID_ENTRY_ENDPOINT_BEHAVIOR_DX6",
                    "SAI_MY_SID_ENTRY_ENDPOINT_BEHAVIOR_DX4")
BUFFER_POOL_TYPES = ("SAI_BUFFER_POOL_TYPE_INGRESS", "SAI_BUFFER_POOL_TYPE_EGRESS")
THRESHOLD_MODES = ("SAI_BUFFER_POOL_THRESHOLD_MODE_STATIC",
                   "SAI_BUFFER_POOL_THRESHOLD_MODE_DYNAMIC")
ECN_MARK_MODES = ("SAI_ECN_MARK_MODE_NONE", "SAI_ECN_MARK_MODE_GREEN", "SAI_ECN_MARK_MODE_ALL")
QOS_MAP_TYPES = ("SAI_QOS_MAP_TYPE_DSCP_TO_TC", "SAI_QOS_MAP_TYPE_TC_TO_QUEUE")


class IpPrefix(NamedTuple):
    """sai_ip_prefix_t: a network address, packed as the kernel and zebra send it, and its
    length. A FIB download makes one per route; an ipaddress network took five times as
    long to build and is hashed anew on every lookup."""

    packed: bytes  # host bits clear
    length: int

    @classmethod
    def parse(cls, text: str) -> IpPrefix:
        network = ip_network(text, strict=False)
        return cls(network.network_address.packed, network.prefixlen)

    def __str__(self) -> str:
        """As ipaddress writes it: inet_ntop for IPv4, which writes it the same and fast;
        ipaddress itself for IPv6, which inet_ntop writes differently in some forms."""
        if len(self.packed) == 4:
            return f"{socket.inet_ntop(socket.AF_INET, self.packed)}/{self.length}"
        return str(IPv6Network((self.packed, self.length)))


@dataclass(frozen=True, order=True)
class _Key:
    """An entry object's key (SAI keys routes, neighbors and SIDs by value, not by OID)."""

    def __str__(self) -> str:
        parts = (f"{f.name}={format_oid(v) if f.name.endswith('_id') else v}"
                 for f in fields(self) for v in (getattr(self, f.name),))
        return "{" + " ".join(parts) + "}"


class RouteKey(NamedTuple):
    """sai_route_entry_t: (virtual router, destination prefix). A tuple, unlike the other
    keys: a FIB download builds one per route and hashes it on every store and lookup."""

    vr_id: int
    destination: IpPrefix

    def __str__(self) -> str:
        return f"{{vr_id={format_oid(self.vr_id)} destination={self.destination}}}"


@dataclass(frozen=True, order=True)
class NeighborKey(_Key):
    """sai_neighbor_entry_t: (router interface, neighbor IP)."""

    rif_id: int
    ip: str


@dataclass(frozen=True, order=True)
class MySidKey(_Key):
    """sai_my_sid_entry_t, reduced to what Linux matches on: (virtual router, SID)."""

    vr_id: int
    sid: IPv6Address


EntryKey = RouteKey | NeighborKey | MySidKey
ENTRY_TYPES = {RouteKey: ObjectType.ROUTE_ENTRY, NeighborKey: ObjectType.NEIGHBOR_ENTRY,
               MySidKey: ObjectType.MY_SID_ENTRY}
