"""Plain typed records for every SAI object the model knows, and their attribute tables.

A record is what the switch stores; the attribute table maps SAI's attribute names
(`SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID`) to record fields, with a parser that rejects bad values,
and flags for mandatory-on-create, create-only and "is an object id of these types". Cross-field
rules (a next hop of type IP needs an IP and a router interface) live in `problem()`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from ipaddress import IPv6Address, ip_address
from typing import Any, ClassVar

from harness.nodes.switch.sai.status import Status
from harness.nodes.switch.sai.types import (
    BUFFER_POOL_TYPES,
    ECN_MARK_MODES,
    MY_SID_BEHAVIORS,
    NEXT_HOP_GROUP_TYPES,
    NEXT_HOP_TYPES,
    NULL_OID,
    PACKET_ACTIONS,
    QOS_MAP_TYPES,
    ROUTER_INTERFACE_TYPES,
    SRV6_SIDLIST_TYPES,
    THRESHOLD_MODES,
    ObjectType,
)

T = ObjectType


def _enum(*allowed: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        if value not in allowed:
            raise ValueError(f"{value!r} is not one of {', '.join(allowed)}")
        return str(value)
    return parse


def _int(lo: int, hi: int) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise ValueError(f"{value!r} is not an integer in [{lo}, {hi}]")
        return value
    return parse


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{value!r} is not a boolean")
    return value


def _ip(value: Any) -> Any:
    return ip_address(value)


def _mac(value: Any) -> str:
    parts = str(value).lower().split(":")
    if len(parts) != 6 or not all(len(p) == 2 and int(p, 16) >= 0 for p in parts):
        raise ValueError(f"{value!r} is not a MAC address")
    return ":".join(parts)


def _lanes(value: Any) -> tuple[int, ...]:
    lanes = tuple(_int(1, 2**31)(v) for v in value)
    if not lanes:
        raise ValueError("a port needs at least one lane")
    return lanes


def _segments(value: Any) -> tuple[IPv6Address, ...]:
    segments = tuple(IPv6Address(v) for v in value)
    if not 1 <= len(segments) <= 16:
        raise ValueError("a SID list holds 1 to 16 segments")
    return segments


def _qos_mapping(value: Any) -> tuple[tuple[int, int], ...]:
    pairs = tuple(sorted((_int(0, 63)(k), _int(0, 63)(v)) for k, v in dict(value).items()))
    if not pairs:
        raise ValueError("a QoS map needs at least one key -> value pair")
    return pairs


def _tc_intervals(value: Any) -> tuple[tuple[int, int], ...]:
    """SAI's per-TC interval map (TC -> milliseconds), as a list of pairs."""
    return tuple(sorted((_int(0, 7)(k), _int(1, 60_000)(v)) for k, v in dict(value).items()))


_OID = _int(0, 2**64 - 1)


@dataclass(frozen=True)
class Attr:
    name: str
    field: str
    parse: Callable[[Any], Any]
    mandatory: bool = False
    create_only: bool = False
    refs: tuple[ObjectType, ...] = ()


def attr(name: str, field: str, parse: Callable[[Any], Any] | None = None, *,
         mandatory: bool = False, create_only: bool = False,
         refs: tuple[ObjectType, ...] = ()) -> Attr:
    return Attr(name, field, parse or _OID, mandatory, create_only, refs)


@dataclass(frozen=True)
class Record:
    """Base of all records; subclasses list their attributes in ATTRS."""

    TYPE: ClassVar[ObjectType]
    ATTRS: ClassVar[tuple[Attr, ...]]
    # Derived from ATTRS once per class: every create of every route looks them up.
    BY_NAME: ClassVar[dict[str, Attr]]
    MANDATORY: ClassVar[tuple[Attr, ...]]
    REFERENCING: ClassVar[tuple[Attr, ...]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.BY_NAME = {a.name: a for a in cls.ATTRS}
        cls.MANDATORY = tuple(a for a in cls.ATTRS if a.mandatory)
        cls.REFERENCING = tuple(a for a in cls.ATTRS if a.refs)

    def problem(self) -> str | None:
        """Cross-attribute rule broken by this record, or None."""
        return None

    def attrs(self) -> dict[str, Any]:
        return {a.name: getattr(self, a.field) for a in self.ATTRS}

    @cached_property
    def references(self) -> tuple[int, ...]:
        """Worked out once per record: records are immutable, and the routes of a FIB
        download share one per next hop."""
        return tuple(oid for a in self.REFERENCING if (oid := getattr(self, a.field)) != NULL_OID)


@dataclass(frozen=True)
class Switch(Record):
    TYPE = T.SWITCH
    ATTRS = (attr("SAI_SWITCH_ATTR_INIT_SWITCH", "init_switch", _bool, mandatory=True,
                  create_only=True),
             attr("SAI_SWITCH_ATTR_RESTART_WARM", "restart_warm", _bool, create_only=True),
             attr("SAI_SWITCH_ATTR_SRC_MAC_ADDRESS", "src_mac_address", _mac))
    init_switch: bool = True
    restart_warm: bool = False
    src_mac_address: str = "00:00:00:00:00:00"


@dataclass(frozen=True)
class VirtualRouter(Record):
    TYPE = T.VIRTUAL_ROUTER
    ATTRS = ()


@dataclass(frozen=True)
class Port(Record):
    """A front-panel port; its HW lane is the Linux ifindex of the node's interface."""

    TYPE = T.PORT
    ATTRS = (attr("SAI_PORT_ATTR_HW_LANE_LIST", "hw_lane_list", _lanes, mandatory=True,
                  create_only=True),
             attr("SAI_PORT_ATTR_SPEED", "speed", _int(1, 1_600_000)),
             attr("SAI_PORT_ATTR_ADMIN_STATE", "admin_state", _bool),
             attr("SAI_PORT_ATTR_MTU", "mtu", _int(68, 65535)),
             attr("SAI_PORT_ATTR_QOS_DSCP_TO_TC_MAP", "qos_dscp_to_tc_map", refs=(T.QOS_MAP,)),
             attr("SAI_PORT_ATTR_QOS_TC_TO_QUEUE_MAP", "qos_tc_to_queue_map",
                  refs=(T.QOS_MAP,)),
             attr("SAI_PORT_ATTR_PRIORITY_FLOW_CONTROL", "priority_flow_control", _int(0, 255)),
             attr("SAI_PORT_ATTR_PFC_TC_DLD_INTERVAL", "pfc_tc_dld_interval", _tc_intervals),
             attr("SAI_PORT_ATTR_PFC_TC_DLR_INTERVAL", "pfc_tc_dlr_interval", _tc_intervals))
    hw_lane_list: tuple[int, ...] = ()
    speed: int = 100_000
    admin_state: bool = True
    mtu: int = 1500
    qos_dscp_to_tc_map: int = NULL_OID
    qos_tc_to_queue_map: int = NULL_OID
    priority_flow_control: int = 0  # bit n: PFC on priority n
    pfc_tc_dld_interval: tuple[tuple[int, int], ...] = ()  # the PFC watchdog's detection, ms
    pfc_tc_dlr_interval: tuple[tuple[int, int], ...] = ()  # and its restoration, ms


@dataclass(frozen=True)
class RouterInterface(Record):
    TYPE = T.ROUTER_INTERFACE
    ATTRS = (attr("SAI_ROUTER_INTERFACE_ATTR_VIRTUAL_ROUTER_ID", "virtual_router_id",
                  mandatory=True, create_only=True, refs=(T.VIRTUAL_ROUTER,)),
             attr("SAI_ROUTER_INTERFACE_ATTR_TYPE", "type", _enum(*ROUTER_INTERFACE_TYPES),
                  mandatory=True, create_only=True),
             attr("SAI_ROUTER_INTERFACE_ATTR_PORT_ID", "port_id", create_only=True,
                  refs=(T.PORT,)),
             attr("SAI_ROUTER_INTERFACE_ATTR_SRC_MAC_ADDRESS", "src_mac_address", _mac),
             attr("SAI_ROUTER_INTERFACE_ATTR_MTU", "mtu", _int(68, 65535)))
    virtual_router_id: int = NULL_OID
    type: str = "SAI_ROUTER_INTERFACE_TYPE_PORT"
    port_id: int = NULL_OID
    src_mac_address: str = "00:00:00:00:00:00"
    mtu: int = 1500

    def problem(self) -> str | None:
        if self.type == "SAI_ROUTER_INTERFACE_TYPE_PORT" and self.port_id == NULL_OID:
            return "a port router interface needs SAI_ROUTER_INTERFACE_ATTR_PORT_ID"
        return None


@dataclass(frozen=True)
class NeighborEntry(Record):
    TYPE = T.NEIGHBOR_ENTRY
    ATTRS = (attr("SAI_NEIGHBOR_ENTRY_ATTR_DST_MAC_ADDRESS", "dst_mac_address", _mac,
                  mandatory=True),
             attr("SAI_NEIGHBOR_ENTRY_ATTR_PACKET_ACTION", "packet_action",
                  _enum(*PACKET_ACTIONS)))
    dst_mac_address: str = "00:00:00:00:00:00"
    packet_action: str = "SAI_PACKET_ACTION_FORWARD"


@dataclass(frozen=True)
class NextHop(Record):
    TYPE = T.NEXT_HOP
    ATTRS = (attr("SAI_NEXT_HOP_ATTR_TYPE", "type", _enum(*NEXT_HOP_TYPES), mandatory=True,
                  create_only=True),
             attr("SAI_NEXT_HOP_ATTR_IP", "ip", _ip, create_only=True),
             attr("SAI_NEXT_HOP_ATTR_ROUTER_INTERFACE_ID", "router_interface_id",
                  create_only=True, refs=(T.ROUTER_INTERFACE,)),
             attr("SAI_NEXT_HOP_ATTR_SRV6_SIDLIST_ID", "srv6_sidlist_id",
                  refs=(T.SRV6_SIDLIST,)))
    type: str = "SAI_NEXT_HOP_TYPE_IP"
    ip: Any = None
    router_interface_id: int = NULL_OID
    srv6_sidlist_id: int = NULL_OID

    def problem(self) -> str | None:
        if self.router_interface_id == NULL_OID:
            return "a next hop needs SAI_NEXT_HOP_ATTR_ROUTER_INTERFACE_ID"
        if self.type == "SAI_NEXT_HOP_TYPE_IP" and self.ip is None:
            return "an IP next hop needs SAI_NEXT_HOP_ATTR_IP"
        if self.type == "SAI_NEXT_HOP_TYPE_SRV6_SIDLIST" and self.srv6_sidlist_id == NULL_OID:
            return "an SRv6 next hop needs SAI_NEXT_HOP_ATTR_SRV6_SIDLIST_ID"
        return None


@dataclass(frozen=True)
class NextHopGroup(Record):
    TYPE = T.NEXT_HOP_GROUP
    ATTRS = (attr("SAI_NEXT_HOP_GROUP_ATTR_TYPE", "type", _enum(*NEXT_HOP_GROUP_TYPES),
                  mandatory=True, create_only=True),)
    type: str = "SAI_NEXT_HOP_GROUP_TYPE_ECMP"


@dataclass(frozen=True)
class NextHopGroupMember(Record):
    """Weight is the member's share of flows: BAG's weighted ECMP is carried here."""

    TYPE = T.NEXT_HOP_GROUP_MEMBER
    ATTRS = (attr("SAI_NEXT_HOP_GROUP_MEMBER_ATTR_NEXT_HOP_GROUP_ID", "next_hop_group_id",
                  mandatory=True, create_only=True, refs=(T.NEXT_HOP_GROUP,)),
             attr("SAI_NEXT_HOP_GROUP_MEMBER_ATTR_NEXT_HOP_ID", "next_hop_id", mandatory=True,
                  create_only=True, refs=(T.NEXT_HOP,)),
             attr("SAI_NEXT_HOP_GROUP_MEMBER_ATTR_WEIGHT", "weight", _int(1, 256)))
    next_hop_group_id: int = NULL_OID
    next_hop_id: int = NULL_OID
    weight: int = 1


@dataclass(frozen=True)
class RouteEntry(Record):
    TYPE = T.ROUTE_ENTRY
    ATTRS = (attr("SAI_ROUTE_ENTRY_ATTR_PACKET_ACTION", "packet_action", _enum(*PACKET_ACTIONS)),
             attr("SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID", "next_hop_id",
                  refs=(T.NEXT_HOP, T.NEXT_HOP_GROUP, T.ROUTER_INTERFACE)))
    packet_action: str = "SAI_PACKET_ACTION_FORWARD"
    next_hop_id: int = NULL_OID

    def problem(self) -> str | None:
        if self.packet_action == "SAI_PACKET_ACTION_FORWARD" and self.next_hop_id == NULL_OID:
            return "a forwarding route needs SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID"
        return None


@dataclass(frozen=True)
class Srv6SidList(Record):
    TYPE = T.SRV6_SIDLIST
    ATTRS = (attr("SAI_SRV6_SIDLIST_ATTR_TYPE", "type", _enum(*SRV6_SIDLIST_TYPES),
                  create_only=True),
             attr("SAI_SRV6_SIDLIST_ATTR_SEGMENT_LIST", "segment_list", _segments,
                  mandatory=True))
    type: str = "SAI_SRV6_SIDLIST_TYPE_ENCAPS"
    segment_list: tuple[IPv6Address, ...] = ()


@dataclass(frozen=True)
class MySidEntry(Record):
    """A local SID: End, End.X (with the next hop to cross to), End.DT6 / End.DT4 / End.DT46
    (decapsulate and look up in a VRF), or End.DX6 / End.DX4 (decapsulate and cross to the
    next hop)."""

    TYPE = T.MY_SID_ENTRY
    ATTRS = (attr("SAI_MY_SID_ENTRY_ATTR_ENDPOINT_BEHAVIOR", "endpoint_behavior",
                  _enum(*MY_SID_BEHAVIORS), mandatory=True, create_only=True),
             attr("SAI_MY_SID_ENTRY_ATTR_NEXT_HOP_ID", "next_hop_id", refs=(T.NEXT_HOP,)),
             attr("SAI_MY_SID_ENTRY_ATTR_VRF", "vrf", refs=(T.VIRTUAL_ROUTER,)),
             attr("SAI_MY_SID_ENTRY_ATTR_PACKET_ACTION", "packet_action",
                  _enum(*PACKET_ACTIONS)))
    endpoint_behavior: str = "SAI_MY_SID_ENTRY_ENDPOINT_BEHAVIOR_E"
    next_hop_id: int = NULL_OID
    vrf: int = NULL_OID
    packet_action: str = "SAI_PACKET_ACTION_FORWARD"

    def problem(self) -> str | None:
        crosses = self.endpoint_behavior.rpartition("_")[2] in ("X", "DX6", "DX4")
        if crosses and self.next_hop_id == NULL_OID:
            return (f"End.{self.endpoint_behavior.rpartition('_')[2]} needs "
                    "SAI_MY_SID_ENTRY_ATTR_NEXT_HOP_ID")
        if looks_up(self.endpoint_behavior) and self.vrf == NULL_OID:
            return (f"End.{self.endpoint_behavior.rpartition('_')[2]} needs "
                    "SAI_MY_SID_ENTRY_ATTR_VRF")
        return None


def looks_up(behavior: str) -> bool:
    """End.DT6, End.DT4, End.DT46: the inner packet is looked up in the entry's VRF."""
    return behavior.rpartition("_")[2] in ("DT6", "DT4", "DT46")


@dataclass(frozen=True)
class BufferPool(Record):
    TYPE = T.BUFFER_POOL
    ATTRS = (attr("SAI_BUFFER_POOL_ATTR_TYPE", "type", _enum(*BUFFER_POOL_TYPES),
                  mandatory=True, create_only=True),
             attr("SAI_BUFFER_POOL_ATTR_SIZE", "size", _int(1, 2**40), mandatory=True),
             attr("SAI_BUFFER_POOL_ATTR_THRESHOLD_MODE", "threshold_mode",
                  _enum(*THRESHOLD_MODES), create_only=True),
             attr("SAI_BUFFER_POOL_ATTR_XOFF_SIZE", "xoff_size", _int(0, 2**40)))
    type: str = "SAI_BUFFER_POOL_TYPE_INGRESS"
    size: int = 0
    threshold_mode: str = "SAI_BUFFER_POOL_THRESHOLD_MODE_DYNAMIC"
    xoff_size: int = 0

    def problem(self) -> str | None:
        if self.xoff_size > self.size:
            return "SAI_BUFFER_POOL_ATTR_XOFF_SIZE exceeds SAI_BUFFER_POOL_ATTR_SIZE"
        return None


@dataclass(frozen=True)
class BufferProfile(Record):
    """Reserved buffer plus PFC headroom: XOFF_TH is the headroom that absorbs the bytes in
    flight (one RTT of line rate) after PAUSE is sent; XON_TH is where traffic resumes."""

    TYPE = T.BUFFER_PROFILE
    ATTRS = (attr("SAI_BUFFER_PROFILE_ATTR_POOL_ID", "pool_id", mandatory=True,
                  refs=(T.BUFFER_POOL,)),
             attr("SAI_BUFFER_PROFILE_ATTR_RESERVED_BUFFER_SIZE", "reserved_buffer_size",
                  _int(0, 2**40)),
             attr("SAI_BUFFER_PROFILE_ATTR_THRESHOLD_MODE", "threshold_mode",
                  _enum(*THRESHOLD_MODES)),
             attr("SAI_BUFFER_PROFILE_ATTR_SHARED_DYNAMIC_TH", "shared_dynamic_th",
                  _int(-8, 8)),
             attr("SAI_BUFFER_PROFILE_ATTR_SHARED_STATIC_TH", "shared_static_th",
                  _int(0, 2**40)),
             attr("SAI_BUFFER_PROFILE_ATTR_XOFF_TH", "xoff_th", _int(0, 2**40)),
             attr("SAI_BUFFER_PROFILE_ATTR_XON_TH", "xon_th", _int(0, 2**40)),
             attr("SAI_BUFFER_PROFILE_ATTR_XON_OFFSET_TH", "xon_offset_th", _int(0, 2**40)))
    pool_id: int = NULL_OID
    reserved_buffer_size: int = 0
    threshold_mode: str = "SAI_BUFFER_POOL_THRESHOLD_MODE_DYNAMIC"
    shared_dynamic_th: int = 0
    shared_static_th: int = 0
    xoff_th: int = 0
    xon_th: int = 0
    xon_offset_th: int = 0

    def problem(self) -> str | None:
        if self.xon_th > self.reserved_buffer_size + self.xoff_th:
            return "SAI_BUFFER_PROFILE_ATTR_XON_TH exceeds reserved buffer plus headroom"
        return None

    @property
    def footprint(self) -> int:
        """Bytes this profile takes out of its pool: reserved buffer plus headroom."""
        return self.reserved_buffer_size + self.xoff_th


@dataclass(frozen=True)
class IngressPriorityGroup(Record):
    """A port's ingress priority group (0..7): where a lossless class's buffer profile, and
    so its PFC headroom, is attached to a port."""

    TYPE = T.INGRESS_PRIORITY_GROUP
    ATTRS = (attr("SAI_INGRESS_PRIORITY_GROUP_ATTR_PORT", "port", mandatory=True,
                  create_only=True, refs=(T.PORT,)),
             attr("SAI_INGRESS_PRIORITY_GROUP_ATTR_INDEX", "index", _int(0, 7), mandatory=True,
                  create_only=True),
             attr("SAI_INGRESS_PRIORITY_GROUP_ATTR_BUFFER_PROFILE", "buffer_profile",
                  refs=(T.BUFFER_PROFILE,)))
    port: int = NULL_OID
    index: int = 0
    buffer_profile: int = NULL_OID


@dataclass(frozen=True)
class QosMap(Record):
    """DSCP -> traffic class (0..63 -> 0..7) or traffic class -> queue (0..7 -> 0..7)."""

    TYPE = T.QOS_MAP
    ATTRS = (attr("SAI_QOS_MAP_ATTR_TYPE", "type", _enum(*QOS_MAP_TYPES), mandatory=True,
                  create_only=True),
             attr("SAI_QOS_MAP_ATTR_MAP_TO_VALUE_LIST", "map_to_value_list", _qos_mapping,
                  mandatory=True))
    type: str = "SAI_QOS_MAP_TYPE_DSCP_TO_TC"
    map_to_value_list: tuple[tuple[int, int], ...] = ()

    def problem(self) -> str | None:
        key_max = 63 if self.type == "SAI_QOS_MAP_TYPE_DSCP_TO_TC" else 7
        for key, value in self.map_to_value_list:
            if key > key_max or value > 7:
                return f"{self.type} maps {key} -> {value}; keys 0..{key_max}, values 0..7"
        return None


@dataclass(frozen=True)
class Wred(Record):
    """Weighted random early detection: between the green thresholds a packet is hit with a
    probability rising linearly to GREEN_DROP_PROBABILITY; an ECT packet hit is marked CE
    when the ECN mark mode covers green, other hit packets are dropped if green is enabled."""

    TYPE = T.WRED
    ATTRS = (attr("SAI_WRED_ATTR_GREEN_ENABLE", "green_enable", _bool),
             attr("SAI_WRED_ATTR_GREEN_MIN_THRESHOLD", "green_min_threshold", _int(0, 2**40)),
             attr("SAI_WRED_ATTR_GREEN_MAX_THRESHOLD", "green_max_threshold", _int(1, 2**40)),
             attr("SAI_WRED_ATTR_GREEN_DROP_PROBABILITY", "green_drop_probability",
                  _int(0, 100)),
             attr("SAI_WRED_ATTR_ECN_MARK_MODE", "ecn_mark_mode", _enum(*ECN_MARK_MODES)))
    green_enable: bool = False
    green_min_threshold: int = 0
    green_max_threshold: int = 1
    green_drop_probability: int = 100
    ecn_mark_mode: str = "SAI_ECN_MARK_MODE_NONE"

    def problem(self) -> str | None:
        if self.green_min_threshold >= self.green_max_threshold:
            return ("SAI_WRED_ATTR_GREEN_MIN_THRESHOLD must be below "
                    "SAI_WRED_ATTR_GREEN_MAX_THRESHOLD")
        return None

    @property
    def marks(self) -> bool:
        return self.ecn_mark_mode != "SAI_ECN_MARK_MODE_NONE"


@dataclass(frozen=True)
class Queue(Record):
    """One of a port's egress queues: its WRED profile, its buffer profile (a lossy queue's
    threshold) and whether the PFC watchdog guards it."""

    TYPE = T.QUEUE
    ATTRS = (attr("SAI_QUEUE_ATTR_PORT", "port", mandatory=True, create_only=True,
                  refs=(T.PORT,)),
             attr("SAI_QUEUE_ATTR_INDEX", "index", _int(0, 7), mandatory=True,
                  create_only=True),
             attr("SAI_QUEUE_ATTR_WRED_PROFILE_ID", "wred_profile_id", refs=(T.WRED,)),
             attr("SAI_QUEUE_ATTR_BUFFER_PROFILE_ID", "buffer_profile_id",
                  refs=(T.BUFFER_PROFILE,)),
             attr("SAI_QUEUE_ATTR_ENABLE_PFC_DLDR", "enable_pfc_dldr", _bool))
    port: int = NULL_OID
    index: int = 0
    wred_profile_id: int = NULL_OID
    buffer_profile_id: int = NULL_OID
    enable_pfc_dldr: bool = False


RECORDS: dict[ObjectType, type[Record]] = {r.TYPE: r for r in (
    Switch, VirtualRouter, Port, RouterInterface, NeighborEntry, NextHop, NextHopGroup,
    NextHopGroupMember, RouteEntry, Srv6SidList, MySidEntry, BufferPool, BufferProfile,
    IngressPriorityGroup, QosMap, Wred, Queue)}


def build(kind: ObjectType, attrs: dict[str, Any]) -> tuple[Status, Record | str]:
    """A record from SAI attributes, or the status and reason it cannot be made."""
    cls = RECORDS[kind]
    values = {}
    for name, value in attrs.items():
        spec = cls.BY_NAME.get(name)
        if spec is None:
            return Status.INVALID_PARAMETER, f"{name} is not an attribute of {kind}"
        try:
            values[spec.field] = spec.parse(value)
        except (ValueError, TypeError) as exc:
            return Status.INVALID_PARAMETER, f"{name}: {exc}"
    missing = [a.name for a in cls.MANDATORY if a.field not in values]
    if missing:
        return Status.MANDATORY_ATTRIBUTE_MISSING, f"missing {', '.join(missing)}"
    record = cls(**values)
    reason = record.problem()
    return (Status.INVALID_PARAMETER, reason) if reason else (Status.SUCCESS, record)


def with_attr(record: Record, name: str, value: Any) -> tuple[Status, Record | str]:
    """The record with one attribute set (the SAI `set` rules: known and not create-only)."""
    spec = record.BY_NAME.get(name)
    if spec is None:
        return Status.INVALID_PARAMETER, f"{name} is not an attribute of {record.TYPE}"
    if spec.create_only:
        return Status.INVALID_PARAMETER, f"{name} is create-only"
    try:
        updated = dataclasses.replace(record, **{spec.field: spec.parse(value)})
    except (ValueError, TypeError) as exc:
        return Status.INVALID_PARAMETER, f"{name}: {exc}"
    reason = updated.problem()
    return (Status.INVALID_PARAMETER, reason) if reason else (Status.SUCCESS, updated)


def ref_types(record: Record) -> dict[str, tuple[ObjectType, ...]]:
    return {a.name: a.refs for a in record.REFERENCING}
