"""The kernel backend: the "ASIC" is the Linux FIB of one namespace, programmed over netlink.

What reaches the kernel:
- next hop (IP) -> a nexthop object `id N via IP dev PORT`; (SRv6 SID list) -> a nexthop
  object that encapsulates (seg6.py: the kernel's seg6, or the userspace engine's);
- next-hop group + members -> a group nexthop object `group A,wA/B,wB` (kernel weight = SAI
  weight), built when a route first uses it and rebuilt (never edited) when members change;
  an empty group has no kernel object and routes to it are blackholes;
- route entry -> a route in the SAI table (`table 200 proto 250`) by `nhid`, or `dev PORT`
  for a router-interface next hop (connected subnet), or `blackhole` for DROP;
- neighbor entry -> a permanent neighbor; my-SID entry -> a `seg6local` route (or one to the
  userspace engine) in the SAI table; port admin state and MTU -> the link; port counters <- link
  stats64; queue counters <- the statistics of the port's root qdisc (queue 0 only: Linux has
  one queue per port here unless a classful qdisc is installed).
What stays in SAI only (validated and kept, no kernel equivalent here): buffer pools and
profiles (xoff/headroom), DSCP->TC and TC->queue maps, router interface MAC/MTU.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from ipaddress import ip_address
from typing import Any

from harness.core.errors import LabError
from harness.linux.nsenter import netlink
from harness.linux.rtnl_channel import Channel
from harness.linux.rtnl_messages import (
    NLM_F_CREATE,
    NLM_F_EXCL,
    NLM_F_REPLACE,
    RTM_DELNEXTHOP,
    RTM_GETNEXTHOP,
    RTM_NEWNEXTHOP,
    RTN_BLACKHOLE,
    nhmsg,
    pack_address,
    pack_group,
    route_encoder,
    rtmsg_nh,
    unpack_address,
    unpack_group,
)
from harness.linux.rtnl_route import RTM_DELROUTE, RTM_GETROUTE, RTM_NEWROUTE
from harness.nodes.switch.sai.backend import Discovery, ObjectView, Op, Ref
from harness.nodes.switch.sai.mmu import Mmu, PortSetup
from harness.nodes.switch.sai.queues import ForeignQdisc, PortQueues, counters, dscp_to_queue
from harness.nodes.switch.sai.records import (
    BufferPool,
    BufferProfile,
    IngressPriorityGroup,
    MySidEntry,
    NeighborEntry,
    NextHop,
    NextHopGroupMember,
    Port,
    QosMap,
    Queue,
    RouteEntry,
    RouterInterface,
    Srv6SidList,
    Wred,
)
from harness.nodes.switch.sai.seg6 import Seg6, Srv6Setup, choose
from harness.nodes.switch.sai.status import Status
from harness.nodes.switch.sai.types import (
    NULL_OID,
    IpPrefix,
    NeighborKey,
    ObjectType,
    RouteKey,
    format_oid,
    oid_type,
)

log = logging.getLogger(__name__)
# What the port engine is made of (mmu.py): a change to any reprograms it.
MMU_RECORDS = (BufferPool, BufferProfile, IngressPriorityGroup, Queue, Wred)
SAI_TABLE = 252  # the FIB the agent programs; ip rules make it the one that forwards
RTPROT_SAI = 250  # protocol of every route and nexthop this backend owns
NH_ID_BASE = 1 << 30  # kernel nexthop ids of SAI objects; zebra counts up from 1
NUD_PERMANENT = 0x80
_ERRNO_STATUS = {17: Status.ITEM_ALREADY_EXISTS, 2: Status.ITEM_NOT_FOUND,
                 3: Status.ITEM_NOT_FOUND, 19: Status.INVALID_PARAMETER,
                 22: Status.INVALID_PARAMETER, 28: Status.TABLE_FULL, 12: Status.NO_MEMORY,
                 95: Status.NOT_SUPPORTED}
_GONE = {2, 3}  # ENOENT, ESRCH: what a delete of something the kernel already removed gets
_REPAIRABLE = _GONE | {22}  # a route whose nexthop the kernel dropped (see _repair)
_PORT_STATS = {"SAI_PORT_STAT_IF_IN_OCTETS": "rx_bytes",
               "SAI_PORT_STAT_IF_IN_UCAST_PKTS": "rx_packets",
               "SAI_PORT_STAT_IF_IN_DISCARDS": "rx_dropped",
               "SAI_PORT_STAT_IF_IN_ERRORS": "rx_errors",
               "SAI_PORT_STAT_IF_OUT_OCTETS": "tx_bytes",
               "SAI_PORT_STAT_IF_OUT_UCAST_PKTS": "tx_packets",
               "SAI_PORT_STAT_IF_OUT_DISCARDS": "tx_dropped",
               "SAI_PORT_STAT_IF_OUT_ERRORS": "tx_errors"}


def _status(err: int) -> Status:
    return Status.SUCCESS if err == 0 else _ERRNO_STATUS.get(err, Status.FAILURE)


class KernelBackend:
    name = "kernel"

    def __init__(self, netns_path: str | None = None, table: int = SAI_TABLE,
                 srv6: Srv6Setup | None = None, ports: PortSetup | None = None) -> None:
        self.netns_path = netns_path
        self.table = table
        self.srv6 = srv6
        self._seg6: Seg6 | None = None
        self.channel = Channel(netns_path)
        self.view: ObjectView | None = None
        self.handles: dict[int, int] = {}  # SAI oid -> kernel nexthop id
        self._next_id = NH_ID_BASE + 1
        self._live_groups: set[int] = set()  # groups that have a kernel object
        self.queues = PortQueues(netns_path)
        self.mmu = Mmu(netns_path, ports)
        self.port_names: dict[int, str] = {}  # port oid -> interface

    def bind(self, view: ObjectView) -> None:
        self.view = view

    @property
    def seg6_chosen(self) -> bool:
        return self._seg6 is not None

    @property
    def seg6(self) -> Seg6:
        """The SRv6 path, chosen when the first SRv6 object arrives."""
        if self._seg6 is None:
            self._seg6 = choose(self.netns_path, self.table, self.srv6)
        return self._seg6

    def close(self) -> None:
        self.channel.close()

    # -- batches --------------------------------------------------------------------------

    def apply(self, ops: list[Op]) -> list[Status]:
        """Route ops go to the kernel as one netlink batch; everything else one by one."""
        statuses: list[Status | None] = [None] * len(ops)
        routes = [(i, op) for i, op in enumerate(ops) if isinstance(op.ref, RouteKey)]
        for group in {op.new.next_hop_id for _, op in routes if isinstance(op.new, RouteEntry)}:
            if (oid_type(group) is ObjectType.NEXT_HOP_GROUP and group not in self._live_groups
                    and self.view is not None and self.view.members(group)):
                self._materialize(group)
        if routes:
            first = self.channel.reserve(len(routes))
            messages = self._route_messages([op for _, op in routes], first)
            for (i, op), err in zip(routes, self.channel.request_many(messages, first),
                                    strict=True):
                statuses[i] = (Status.SUCCESS if not err or (op.new is None and err in _GONE)
                               else self._repair(op) if err in _REPAIRABLE
                               else _status(err))
        if len(routes) < len(ops):
            for i, op in enumerate(ops):
                if statuses[i] is None:
                    statuses[i] = self._apply_one(op)
        return statuses  # type: ignore[return-value]

    def _apply_one(self, op: Op) -> Status:
        record = op.new or op.old
        if isinstance(record, NextHop):
            return self._next_hop(op)
        if isinstance(record, NextHopGroupMember):
            return self._refresh_group(record.next_hop_group_id)
        if isinstance(record, Port):
            return self._port(op)
        if isinstance(record, NeighborEntry):
            return self._neighbor(op)
        if isinstance(record, MySidEntry):
            return self._my_sid(op)
        if isinstance(record, QosMap) and op.api == "set":
            status = self._remap_ports(op.ref)  # type: ignore[arg-type]
            return self._sync_mmu() if status.ok else status
        if isinstance(record, MMU_RECORDS):
            return self._sync_mmu()
        if isinstance(record, Srv6SidList) and op.api == "set":
            return self._reprogram_users(op.ref)  # type: ignore[arg-type]
        if isinstance(record, Srv6SidList) and op.api == "remove":
            self.seg6.forget_list(op.ref)  # type: ignore[arg-type]
        if op.api == "remove" and isinstance(op.ref, int):
            self.handles.pop(op.ref, None)
        return Status.SUCCESS  # state kept in SAI only (see module docstring)

    # -- routes ---------------------------------------------------------------------------

    def _route_encoder(self, op: Op) -> Callable[[int, bytes, int], bytes]:
        """How to write this route's request: a function of the record alone (and of the
        handles and groups already in place), so the routes sharing one encode alike."""
        if op.new is None:
            return route_encoder(RTM_DELROUTE, 0, self.table, RTPROT_SAI)
        route: RouteEntry = op.new  # type: ignore[assignment]
        flags = NLM_F_CREATE | NLM_F_REPLACE
        target = route.next_hop_id
        kind = oid_type(target) if target else None
        if route.packet_action != "SAI_PACKET_ACTION_FORWARD" or kind is None or (
                kind is ObjectType.NEXT_HOP_GROUP and target not in self._live_groups):
            return route_encoder(RTM_NEWROUTE, flags, self.table, RTPROT_SAI, blackhole=True)
        if kind is ObjectType.ROUTER_INTERFACE:
            return route_encoder(RTM_NEWROUTE, flags, self.table, RTPROT_SAI,
                                 oif=self._lane_of_rif(target))
        return route_encoder(RTM_NEWROUTE, flags, self.table, RTPROT_SAI,
                             nh_id=self.handles[target])

    def _route_messages(self, ops: list[Op], first_seq: int) -> list[bytes]:
        """Requests for route ops; one encoder per distinct record (records are shared)."""
        encoders: dict[int, Callable[[int, bytes, int], bytes]] = {}
        messages = []
        for seq, op in enumerate(ops, first_seq):
            encoder = encoders.get(id(op.new))
            if encoder is None:
                encoder = encoders[id(op.new)] = self._route_encoder(op)
            destination = op.ref.destination  # type: ignore[union-attr]
            messages.append(encoder(seq, destination.packed, destination.length))
        return messages

    def _repair(self, op: Op) -> Status:
        """The kernel deletes nexthops (and the routes using them) when their port goes down,
        which an ASIC never does. A route refused for a missing nexthop gets its nexthop (or
        its group's members and group) programmed again, then one more try."""
        route = op.new
        target = route.next_hop_id if isinstance(route, RouteEntry) else NULL_OID
        assert self.view is not None
        if oid_type(target) is ObjectType.NEXT_HOP:
            record = self.view.record(target)
            self._next_hop(Op(target, record, record))
        elif oid_type(target) is ObjectType.NEXT_HOP_GROUP:
            for member in self.view.members(target).values():
                hop = self.view.record(member.next_hop_id)
                self._next_hop(Op(member.next_hop_id, hop, hop))
            self._materialize(target)
        else:
            return Status.INVALID_PARAMETER
        seq = self.channel.reserve(1)
        return _status(self.channel.request_many(self._route_messages([op], seq), seq)[0])

    def _reprogram_routes(self, target: int) -> Status:
        assert self.view is not None
        ops = [Op(ref, self.view.record(ref), self.view.record(ref))
               for ref in self.view.referrers(target) if isinstance(ref, RouteKey)]
        statuses = self.apply(ops) if ops else []
        return next((s for s in statuses if not s.ok), Status.SUCCESS)

    # -- next hops and groups -------------------------------------------------------------

    def _handle(self, oid: int) -> int:
        if oid not in self.handles:
            self.handles[oid] = self._next_id
            self._next_id += 1
        return self.handles[oid]

    def _lane_of_rif(self, rif: int) -> int:
        assert self.view is not None
        interface: RouterInterface = self.view.record(rif)  # type: ignore[assignment]
        port: Port = self.view.record(interface.port_id)  # type: ignore[assignment]
        return port.hw_lane_list[0]

    def _next_hop(self, op: Op) -> Status:
        oid: int = op.ref  # type: ignore[assignment]
        if op.new is None:
            return _status(self._delete_nexthop(self.handles.pop(oid)))
        hop: NextHop = op.new  # type: ignore[assignment]
        msg = nhmsg()
        msg["protocol"] = RTPROT_SAI
        attrs: list[tuple[str, Any]] = [("NHA_ID", self._handle(oid))]
        oif = self._lane_of_rif(hop.router_interface_id)
        if hop.type == "SAI_NEXT_HOP_TYPE_SRV6_SIDLIST":
            assert self.view is not None
            sids: Srv6SidList = self.view.record(hop.srv6_sidlist_id)  # type: ignore[assignment]
            msg["family"] = socket.AF_INET6
            try:
                attrs += self.seg6.next_hop_attrs(hop.srv6_sidlist_id, sids, oif)
            except LabError as exc:
                log.error("SRv6 next hop %s: %s", format_oid(oid), exc)
                return Status.FAILURE
        else:
            msg["family"] = socket.AF_INET6 if hop.ip.version == 6 else socket.AF_INET
            attrs += [("NHA_OIF", oif), ("NHA_GATEWAY", pack_address(str(hop.ip)))]
        msg["attrs"] = attrs
        return _status(self.channel.request(msg, RTM_NEWNEXTHOP, NLM_F_CREATE | NLM_F_REPLACE))

    def _delete_nexthop(self, handle: int) -> int:
        """0 also when the kernel already dropped it (its port went down)."""
        msg = nhmsg()
        msg["attrs"] = [("NHA_ID", handle)]
        err = self.channel.request(msg, RTM_DELNEXTHOP)
        return 0 if err in _GONE else err

    def _refresh_group(self, group: int) -> Status:
        """Make the kernel group match the SAI members (weights included).

        A kernel group is never replaced in place: zebra watches every nexthop object of the
        namespace and answers an in-place change of a group it has seen with its own stale
        copy ("Kernel updated a nexthop group ... sending it back down"). So a change builds
        a new group object, re-points the routes (a route replace: no gap), then deletes the
        old one. Groups no route uses yet are not in the kernel at all (built on first use).
        """
        assert self.view is not None
        old = self.handles.get(group) if group in self._live_groups else None
        if old is None and not self._routes_to(group):
            return Status.SUCCESS
        if not self.view.members(group):
            self._live_groups.discard(group)
            self.handles.pop(group, None)
            status = self._reprogram_routes(group)  # routes become blackholes first
            return status if not status.ok or old is None else _status(self._delete_nexthop(old))
        status = self._materialize(group)
        if status.ok:
            status = self._reprogram_routes(group)
        if status.ok and old is not None:
            status = _status(self._delete_nexthop(old))
        return status

    def _routes_to(self, group: int) -> list[RouteKey]:
        assert self.view is not None
        return [r for r in self.view.referrers(group) if isinstance(r, RouteKey)]

    def _materialize(self, group: int) -> Status:
        """A fresh kernel group object holding the group's current members."""
        assert self.view is not None
        members = [(self.handles[m.next_hop_id], m.weight)
                   for m in self.view.members(group).values()]
        handle = self._next_id
        self._next_id += 1
        msg = nhmsg()
        msg["protocol"] = RTPROT_SAI
        msg["attrs"] = [("NHA_ID", handle), ("NHA_GROUP", pack_group(members))]
        status = _status(self.channel.request(msg, RTM_NEWNEXTHOP, NLM_F_CREATE | NLM_F_EXCL))
        if status.ok:
            self.handles[group] = handle
            self._live_groups.add(group)
        return status

    def _reprogram_users(self, sid_list: int) -> Status:
        assert self.view is not None
        for ref in self.view.referrers(sid_list):
            record = self.view.record(ref)
            if isinstance(record, NextHop):
                status = self._next_hop(Op(ref, record, record))
                if not status.ok:
                    return status
        return Status.SUCCESS

    # -- ports, neighbors, SIDs -----------------------------------------------------------

    def _port(self, op: Op) -> Status:
        port: Port = op.new or op.old  # type: ignore[assignment]
        with netlink(self.netns_path) as ip:
            links = ip.get_links(port.hw_lane_list[0])
            if not links:
                return Status.INVALID_PARAMETER
            link = links[0]
            name = link.get_attr("IFLA_IFNAME")
            if op.new is None:
                self.queues.clear(name)
                self.port_names.pop(op.ref, None)  # type: ignore[call-overload]
                return self._sync_mmu()
            self.port_names[op.ref] = name  # type: ignore[index]
            up = bool(link["flags"] & 1)
            changes: dict[str, Any] = {}
            if port.admin_state != up:
                changes["state"] = "up" if port.admin_state else "down"
            if port.mtu != link.get_attr("IFLA_MTU"):
                changes["mtu"] = port.mtu
            if changes:
                ip.link("set", index=port.hw_lane_list[0], **changes)
        return self._port_queues(op.ref, port)  # type: ignore[arg-type]

    def _sync_mmu(self, *, prune: bool = False) -> Status:
        """The port engine as the objects say; a port it serves keeps no HTB queues (its
        maps may have made them before its QUEUE objects arrived)."""
        assert self.view is not None
        status = self.mmu.sync(self.view, self.port_names, prune=prune)
        for name in self.mmu.wired:
            self.queues.clear(name)
        return status

    def settle(self) -> Status:
        """After a boot's configuration: what a previous agent left and this one's document
        no longer declares goes (mmu.py)."""
        return self._sync_mmu(prune=True)

    def _port_queues(self, ref: int, port: Port) -> Status:
        """The port's queues as its maps say (queues.py), or the port engine's when QUEUE
        objects name it (mmu.py); none without a DSCP -> TC map."""
        assert self.view is not None
        name = self.port_names[ref]
        if port.qos_dscp_to_tc_map == NULL_OID or self.mmu.served(self.view, ref):
            self.queues.clear(name)
            return self._sync_mmu()
        to_tc: QosMap = self.view.record(port.qos_dscp_to_tc_map)  # type: ignore[assignment]
        to_queue: QosMap | None = self.view.record(port.qos_tc_to_queue_map)  # type: ignore
        mapping = dscp_to_queue(dict(to_tc.map_to_value_list),
                                dict(to_queue.map_to_value_list) if to_queue else {})
        try:
            self.queues.program(name, port.hw_lane_list[0], port.speed, mapping)
        except ForeignQdisc as exc:
            log.error("port %s: %s", name, exc)
            return Status.NOT_SUPPORTED
        except LabError as exc:
            log.error("port %s: %s", name, exc)
            return Status.FAILURE
        return Status.SUCCESS

    def _remap_ports(self, qos_map: int) -> Status:
        """A map's pairs changed: the ports bound to it take the new ones."""
        assert self.view is not None
        for ref in self.view.referrers(qos_map):
            port = self.view.record(ref)
            if isinstance(port, Port) and not (status := self._port_queues(
                    ref, port)).ok:  # type: ignore[arg-type]
                return status
        return Status.SUCCESS

    def _neighbor(self, op: Op) -> Status:
        key: NeighborKey = op.ref  # type: ignore[assignment]
        lane = self._lane_of_rif(key.rif_id)
        with netlink(self.netns_path) as ip:
            if op.new is None:
                ip.neigh("del", dst=key.ip, ifindex=lane)
            else:
                entry: NeighborEntry = op.new  # type: ignore[assignment]
                ip.neigh("replace", dst=key.ip, ifindex=lane, state=NUD_PERMANENT,
                         lladdr=entry.dst_mac_address)
        return Status.SUCCESS

    def _my_sid(self, op: Op) -> Status:
        entry: MySidEntry | None = op.new  # type: ignore[assignment]
        hop: NextHop | None = None
        oif = 0
        if entry is not None and entry.next_hop_id != NULL_OID:
            assert self.view is not None
            hop = self.view.record(entry.next_hop_id)  # type: ignore[assignment]
            oif = self._lane_of_rif(hop.router_interface_id)  # type: ignore[union-attr]
        try:
            return self.seg6.my_sid(op.ref.sid, entry, hop, oif)  # type: ignore[union-attr]
        except LabError as exc:
            log.error("my-SID %s: %s", op.ref, exc)
            return Status.FAILURE

    # -- counters -------------------------------------------------------------------------

    def port_stats(self, port: Port) -> dict[str, int]:
        with netlink(self.netns_path) as ip:
            links = ip.get_links(port.hw_lane_list[0])
        stats = links[0].get_attr("IFLA_STATS64") if links else None
        return {name: int(stats[field]) for name, field in _PORT_STATS.items()} if stats else {}

    def queue_stats(self, port: Port) -> list[dict[str, int]]:
        lane = port.hw_lane_list[0]
        if (engine := self.mmu.counters()) is not None:
            with netlink(self.netns_path) as ip:
                name = ip.get_links(lane)[0].get_attr("IFLA_IFNAME")
            if name in engine.names:
                return [{"queue": i, "qdisc": "fl-port", **q.stats}
                        for i, q in enumerate(engine.port(name).queues)]
        if self.queues.maps and (queues := self.queues.stats(lane)):
            return queues  # type: ignore[return-value]
        root = self.queues.root(lane)
        return [] if root is None else [{"queue": 0, "qdisc": root.get_attr("TCA_KIND"),
                                         **counters(root)}]

    # -- warm restart ---------------------------------------------------------------------

    def discover(self) -> Discovery:
        """Everything this backend left in the kernel: its nexthops and SAI-table routes, and
        the SRv6 objects among them (seg6.py reads those back on either path)."""
        found = Discovery()
        highest = NH_ID_BASE
        for msg in self.channel.dump(nhmsg(), RTM_GETNEXTHOP, nhmsg):
            handle = msg.get_attr("NHA_ID")
            if msg["protocol"] != RTPROT_SAI or handle < NH_ID_BASE:
                continue
            highest = max(highest, handle)
            group, gateway = msg.get_attr("NHA_GROUP"), msg.get_attr("NHA_GATEWAY")
            listed = self.seg6.sid_list_of(msg)
            if group:
                found.groups[handle] = unpack_group(group)
            elif listed is not None:
                found.sid_lists[handle] = listed
            elif gateway and msg.get_attr("NHA_ENCAP") is None:
                found.next_hops[handle] = (unpack_address(gateway), msg.get_attr("NHA_OIF"))
        self._next_id = highest + 1
        for family in (socket.AF_INET, socket.AF_INET6):
            request = rtmsg_nh()
            request["family"] = family
            for msg in self.channel.dump(request, RTM_GETROUTE, rtmsg_nh):
                if msg.get_attr("RTA_TABLE") != self.table or msg["proto"] != RTPROT_SAI:
                    continue
                if (sid := self.seg6.my_sid_of(msg)) is not None:
                    found.my_sids[sid[0]] = sid[1]
                # a route by nhid carries its nexthop's encap in the dump: it is ours all the same
                handle = msg.get_attr("RTA_NH_ID")
                if sid is not None or (msg.get_attr("RTA_ENCAP_TYPE") is not None
                                       and not handle):
                    continue
                prefix = str(IpPrefix.parse(f"{msg.get_attr('RTA_DST') or _any(family)}/"
                                            f"{msg['dst_len']}"))
                found.routes[prefix] = (("drop", None) if msg["type"] == RTN_BLACKHOLE
                                        else ("nh", handle) if handle
                                        else ("lane", msg.get_attr("RTA_OIF")))
        return found

    def adopt(self, ref: Ref, handle: int) -> None:
        if isinstance(ref, int) and oid_type(ref) is ObjectType.SRV6_SIDLIST:
            self.seg6.adopt_list(ref, handle)
        elif isinstance(ref, int) and handle:
            self.handles[ref] = handle
            if oid_type(ref) is ObjectType.NEXT_HOP_GROUP:
                self._live_groups.add(ref)


def _any(family: int) -> str:
    return str(ip_address("::" if family == socket.AF_INET6 else "0.0.0.0"))

