"""The SAI API of one switch: create / remove / set / get, each returning a SAI status.

The switch owns the object store. It validates attributes, checks that every object id an
attribute or key points at exists and has an allowed type, counts references (a next hop used
by a route cannot be removed: OBJECT_IN_USE), enforces the capacity profile (TABLE_FULL) and
the buffer-pool budget, applies injected faults, and only then asks the backend to program
its hardware. A call the backend refuses is rolled back, so the store always matches it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from ipaddress import IPv6Address, ip_address
from typing import Any

from harness.nodes.switch.sai.backend import Backend, Discovery, Op, Ref
from harness.nodes.switch.sai.capacity import CapacityProfile
from harness.nodes.switch.sai.faults import FaultPlan
from harness.nodes.switch.sai.records import (
    BufferProfile,
    IngressPriorityGroup,
    MySidEntry,
    NextHop,
    NextHopGroup,
    NextHopGroupMember,
    Port,
    Record,
    RouteEntry,
    RouterInterface,
    Srv6SidList,
    Switch,
    VirtualRouter,
    build,
    looks_up,
    with_attr,
)
from harness.nodes.switch.sai.status import Status
from harness.nodes.switch.sai.trace import Trace
from harness.nodes.switch.sai.types import (
    ENTRY_TYPES,
    NULL_OID,
    EntryKey,
    IpPrefix,
    MySidKey,
    NeighborKey,
    ObjectType,
    RouteKey,
    format_oid,
    make_oid,
    oid_type,
)

T = ObjectType
_KEY_REFS = {RouteKey: ("vr_id", (T.VIRTUAL_ROUTER,)), MySidKey: ("vr_id", (T.VIRTUAL_ROUTER,)),
             NeighborKey: ("rif_id", (T.ROUTER_INTERFACE,))}
# Key references that hold a reference count. A neighbor pins its router interface; routes
# and SIDs name the virtual router, which is never removed, so counting them would only
# make one set as big as the FIB.
_COUNTED_KEY_REFS = {NeighborKey: "rif_id"}


# build()'s result and the reason a record points at nothing (None: its references exist).
Built = tuple[Status, Record | str, str | None]
_KEY_TYPES = {kind: key_type for key_type, kind in ENTRY_TYPES.items()}


@dataclass
class _Bulk:
    """What one bulk create works out once for all its entries. The routes of a FIB download
    mostly share a next hop and its attribute dict, records are immutable so they can share
    one, and nothing a bulk create references can vanish during it."""

    objects: dict[Ref, Record]  # the table of the kind being created
    room: int | None  # entries the table still takes (None: no limit)
    key_type: type  # what the kind is created with: its entry key, or no key (an OID)
    admit: Callable[[SaiSwitch, Any], tuple[Status, str]] | None  # rules beyond attributes
    # id of an attribute dict -> its record; the entries hold the dicts, so ids stay theirs
    built: dict[int, Built] = field(default_factory=dict)
    key_reasons: dict[int, str | None] = field(default_factory=dict)  # key's oid -> problem


def _kind_of(ref: Ref) -> ObjectType | None:
    return ENTRY_TYPES.get(type(ref)) if not isinstance(ref, int) else oid_type(ref)


def _show(ref: Ref) -> str:
    return format_oid(ref) if isinstance(ref, int) else str(ref)


class SaiSwitch:
    def __init__(self, backend: Backend, *, capacity: CapacityProfile | None = None,
                 faults: FaultPlan | None = None, trace: Trace | None = None,
                 attrs: dict[str, Any] | None = None) -> None:
        self.backend = backend
        self.capacity = capacity or CapacityProfile()
        self.faults = faults or FaultPlan()
        self.trace = trace or Trace()
        self._objects: dict[ObjectType, dict[Ref, Record]] = defaultdict(dict)
        self._referrers: dict[int, set[Ref]] = defaultdict(set)
        self._members: dict[int, dict[int, NextHopGroupMember]] = defaultdict(dict)
        self._next_index = 1
        status, record = build(T.SWITCH, attrs or {"SAI_SWITCH_ATTR_INIT_SWITCH": True})
        if not isinstance(record, Switch):
            raise ValueError(f"switch attributes: {status}: {record}")
        self.switch_id = self._store(make_oid(T.SWITCH, self._allocate()), record)
        self.default_vr = self._store(make_oid(T.VIRTUAL_ROUTER, self._allocate()),
                                      VirtualRouter())
        self.warm = record.restart_warm
        backend.bind(self)

    # -- reading --------------------------------------------------------------------------

    def record(self, ref: Ref) -> Record | None:
        kind = _kind_of(ref)
        return None if kind is None else self._objects[kind].get(ref)

    def objects(self, kind: ObjectType) -> dict[Ref, Record]:
        return dict(self._objects[kind])

    def count(self, kind: ObjectType) -> int:
        return len(self._objects[kind])

    def refcount(self, oid: int) -> int:
        return len(self._referrers.get(oid, ()))

    def referrers(self, oid: int) -> set[Ref]:
        return set(self._referrers.get(oid, ()))

    def members(self, group: int) -> dict[int, NextHopGroupMember]:
        return dict(self._members.get(group, {}))

    def router_interface_of_lane(self, lane: int) -> int | None:
        ports = {oid for oid, p in self._objects[T.PORT].items()
                 if isinstance(p, Port) and lane in p.hw_lane_list}
        return next((oid for oid, r in self._objects[T.ROUTER_INTERFACE].items()
                     if isinstance(r, RouterInterface) and r.port_id in ports), None)

    # -- the API --------------------------------------------------------------------------

    def create(self, kind: ObjectType, attrs: dict[str, Any],
               key: EntryKey | None = None) -> tuple[Status, Ref | None]:
        return self.create_bulk(kind, [(key, attrs)])[0]

    def remove(self, ref: Ref) -> Status:
        return self.remove_bulk([ref])[0]

    def set(self, ref: Ref, name: str, value: Any) -> Status:
        return self.set_bulk([(ref, name, value)])[0]

    def create_bulk(self, kind: ObjectType, entries: list[tuple[EntryKey | None, dict[str, Any]]]
                    ) -> list[tuple[Status, Ref | None]]:
        """SAI's bulk create (e.g. create_route_entries): one backend batch, one status each."""
        results: list[tuple[Status, Ref | None]] = []
        pending = []
        limit, objects = self.capacity.limit(kind), self._objects[kind]
        bulk = _Bulk(objects, None if limit is None else limit - len(objects),
                     _KEY_TYPES.get(kind, type(None)), _ADMISSION.get(kind))
        for key, attrs in entries:
            status, ref, record, note = self._prepare_create(kind, attrs, key, bulk)
            if record is not None and ref is not None:
                pending.append((len(results), kind, Op(ref, None, record), attrs))
            else:
                self.trace.record("create", kind, key or "", attrs, status, note)
            results.append((status, ref))
        for index, status in self._commit("create", pending):
            results[index] = (status, None)
        return results

    def remove_bulk(self, refs: list[Ref]) -> list[Status]:
        results, pending = [], []
        for ref in refs:
            kind = _kind_of(ref)
            status, record, note = (self._prepare_remove(kind, ref) if kind
                                    else (Status.INVALID_OBJECT_ID, None, ""))
            if record is not None:
                pending.append((len(results), kind, Op(ref, record, None), {}))
            else:
                self.trace.record("remove", kind, ref, {}, status, note)
            results.append(status)
        for index, status in self._commit("remove", pending):
            results[index] = status
        return results

    def set_bulk(self, items: list[tuple[Ref, str, Any]]) -> list[Status]:
        results, pending = [], []
        for ref, name, value in items:
            kind = _kind_of(ref)
            status, old, new, note = (self._prepare_set(kind, ref, name, value) if kind
                                      else (Status.INVALID_OBJECT_ID, None, None, ""))
            if old is not None and new is not None:
                pending.append((len(results), kind, Op(ref, old, new), {name: value}))
            else:
                self.trace.record("set", kind, ref, {name: value}, status, note)
            results.append(status)
        for index, status in self._commit("set", pending):
            results[index] = status
        return results

    def _commit(self, api: str, pending: list[tuple[int, ObjectType | None, Op, dict[str, Any]]]
                ) -> list[tuple[int, Status]]:
        """Hand prepared (already stored) changes to the backend; roll back each refusal.
        Returns (result index, status) of the refused ones."""
        if not pending:
            return []
        statuses = self.backend.apply([op for _, _, op, _ in pending])
        self.trace.record_bulk(api, [(kind, op.ref, attrs, "") for _, kind, op, attrs in pending],
                               statuses, f"{self.backend.name} refused")
        if statuses.count(Status.SUCCESS) == len(statuses):
            return []
        refused = []
        for (index, _, op, _), status in zip(pending, statuses, strict=True):
            if status is not Status.SUCCESS:
                if op.new is not None:
                    self._unstore(op.ref, op.new)
                if op.old is not None:
                    self._store(op.ref, op.old)
                refused.append((index, status))
        return refused

    def get(self, ref: Ref, names: list[str] | None = None) -> tuple[Status, dict[str, Any]]:
        record = self.record(ref)
        if record is None:
            return Status.ITEM_NOT_FOUND, {}
        values = record.attrs()
        if names is None:
            return Status.SUCCESS, values
        unknown = [n for n in names if n not in values]
        if unknown:
            return Status.INVALID_PARAMETER, {}
        return Status.SUCCESS, {n: values[n] for n in names}

    def get_port_stats(self, port: int) -> tuple[Status, dict[str, int]]:
        record = self._objects[T.PORT].get(port)
        if not isinstance(record, Port):
            return Status.ITEM_NOT_FOUND, {}
        return Status.SUCCESS, self.backend.port_stats(record)

    def get_queue_stats(self, port: int) -> tuple[Status, list[dict[str, int]]]:
        record = self._objects[T.PORT].get(port)
        if not isinstance(record, Port):
            return Status.ITEM_NOT_FOUND, []
        return Status.SUCCESS, self.backend.queue_stats(record)

    # -- internals ------------------------------------------------------------------------

    def _allocate(self) -> int:
        index, self._next_index = self._next_index, self._next_index + 1
        return index

    def _store(self, ref: Ref, record: Record) -> Ref:
        self._objects[record.TYPE][ref] = record
        for target in self._targets(ref, record):
            self._referrers[target].add(ref)
        if isinstance(record, NextHopGroupMember):
            self._members[record.next_hop_group_id][ref] = record  # type: ignore[index]
        return ref

    def _unstore(self, ref: Ref, record: Record) -> None:
        del self._objects[record.TYPE][ref]
        for target in self._targets(ref, record):
            self._referrers[target].discard(ref)
            if not self._referrers[target]:
                del self._referrers[target]
        if isinstance(record, NextHopGroupMember):
            self._members[record.next_hop_group_id].pop(ref, None)  # type: ignore[arg-type]

    @staticmethod
    def _targets(ref: Ref, record: Record) -> tuple[int, ...]:
        counted = _COUNTED_KEY_REFS.get(type(ref))
        if counted is None:
            return record.references
        return *record.references, getattr(ref, counted)

    def _bad_reference(self, record: Record) -> str | None:
        """An attribute pointing at an object that does not exist, or at the wrong kind."""
        for a in record.REFERENCING:
            reason = self._missing(a.name, getattr(record, a.field), a.refs)
            if reason:
                return reason
        return None

    def _bad_key_reference(self, key: EntryKey, bulk: _Bulk) -> str | None:
        name, kinds = _KEY_REFS[type(key)]
        oid = getattr(key, name)
        if oid not in bulk.key_reasons:
            bulk.key_reasons[oid] = self._missing(name, oid, kinds)
        return bulk.key_reasons[oid]

    def _missing(self, name: str, oid: int, kinds: tuple[ObjectType, ...]) -> str | None:
        if oid == NULL_OID:
            return None
        kind = oid_type(oid)
        if kind not in kinds or oid not in self._objects[kind]:
            return f"{name}={format_oid(oid)} is not an existing " \
                   f"{' or '.join(str(k) for k in kinds)}"
        return None

    def _build(self, kind: ObjectType, attrs: dict[str, Any], bulk: _Bulk) -> Built:
        """build() and the reference check, once per attribute dict of a bulk call."""
        built = bulk.built.get(id(attrs))
        if built is None:
            built = bulk.built[id(attrs)] = self._build_one(kind, attrs)
        return built

    def _build_one(self, kind: ObjectType, attrs: dict[str, Any]) -> Built:
        status, record = build(kind, attrs)
        return status, record, self._bad_reference(record) if isinstance(record, Record) else None

    def _prepare_create(self, kind: ObjectType, attrs: dict[str, Any], key: EntryKey | None,
                        bulk: _Bulk) -> tuple[Status, Ref | None, Record | None, str]:
        """Validate a create and store the record; the backend is called afterwards."""
        if kind in (T.SWITCH, T.VIRTUAL_ROUTER):
            return Status.NOT_SUPPORTED, None, None, "one switch with its default virtual router"
        if type(key) is not bulk.key_type:
            return Status.INVALID_PARAMETER, None, None, f"{kind} is created " + (
                "without a key" if bulk.key_type is type(None) else "with its entry key")
        injected = self.faults.draw("create", kind) if self.faults.rules else None
        if injected is not None:
            return injected, None, None, "injected fault"
        status, record, reason = self._build(kind, attrs, bulk)
        if not isinstance(record, Record):
            return status, None, None, record
        if key is not None:
            if key in bulk.objects:
                return Status.ITEM_ALREADY_EXISTS, None, None, ""
            if not reason:
                reason = self._bad_key_reference(key, bulk)
        if reason:
            return Status.INVALID_OBJECT_ID, None, None, reason
        if bulk.room is not None and bulk.room <= 0:
            return Status.TABLE_FULL, None, None, f"{self.capacity.limit(kind)} entries"
        if bulk.admit is not None:
            status, reason = bulk.admit(self, record)
            if status is not Status.SUCCESS:
                return status, None, None, reason
        if bulk.room is not None:
            bulk.room -= 1
        ref: Ref = key if key is not None else make_oid(kind, self._allocate())
        self._store(ref, record)
        return Status.SUCCESS, ref, record, ""

    # Rules that depend on other objects, per object type: pool budgets, lanes, members.

    def _admit_buffer_profile(self, record: BufferProfile) -> tuple[Status, str]:
        pool = self._objects[T.BUFFER_POOL][record.pool_id]
        used = sum(p.footprint for p in self._objects[T.BUFFER_PROFILE].values()
                   if isinstance(p, BufferProfile) and p.pool_id == record.pool_id)
        if used + record.footprint > pool.size:  # type: ignore[attr-defined]
            return Status.INSUFFICIENT_RESOURCES, (
                f"pool holds {pool.size} bytes, profiles take {used}, "  # type: ignore[attr-defined]
                f"this one {record.footprint}")
        return Status.SUCCESS, ""

    def _admit_port(self, record: Port) -> tuple[Status, str]:
        taken = {lane for p in self._objects[T.PORT].values() if isinstance(p, Port)
                 for lane in p.hw_lane_list}
        if taken & set(record.hw_lane_list):
            return Status.ITEM_ALREADY_EXISTS, "lane already belongs to a port"
        return Status.SUCCESS, ""

    def _admit_priority_group(self, record: IngressPriorityGroup) -> tuple[Status, str]:
        if any(isinstance(g, IngressPriorityGroup) and (g.port, g.index) == (record.port,
                                                                              record.index)
               for g in self._objects[T.INGRESS_PRIORITY_GROUP].values()):
            return Status.ITEM_ALREADY_EXISTS, f"the port has priority group {record.index}"
        return Status.SUCCESS, ""

    def _admit_member(self, record: NextHopGroupMember) -> tuple[Status, str]:
        members = self._members.get(record.next_hop_group_id, {}).values()
        if any(m.next_hop_id == record.next_hop_id for m in members):
            return Status.ITEM_ALREADY_EXISTS, "next hop already in this group"
        return Status.SUCCESS, ""

    def _prepare_remove(self, kind: ObjectType, ref: Ref
                        ) -> tuple[Status, Record | None, str]:
        if kind in (T.SWITCH, T.VIRTUAL_ROUTER):
            return Status.NOT_SUPPORTED, None, "the switch and its default virtual router stay"
        record = self._objects[kind].get(ref)
        if record is None:
            return Status.ITEM_NOT_FOUND, None, ""
        injected = self.faults.draw("remove", kind)
        if injected is not None:
            return injected, None, "injected fault"
        if isinstance(ref, int) and self.refcount(ref):
            users = ", ".join(sorted(_show(r) for r in self._referrers[ref])[:3])
            return Status.OBJECT_IN_USE, None, f"{self.refcount(ref)} reference(s): {users}"
        self._unstore(ref, record)
        return Status.SUCCESS, record, ""

    def _prepare_set(self, kind: ObjectType, ref: Ref, name: str, value: Any
                     ) -> tuple[Status, Record | None, Record | None, str]:
        old = self._objects[kind].get(ref)
        if old is None:
            return Status.ITEM_NOT_FOUND, None, None, ""
        injected = self.faults.draw("set", kind)
        if injected is not None:
            return injected, None, None, "injected fault"
        status, new = with_attr(old, name, value)
        if not isinstance(new, Record):
            return status, None, None, new
        reason = self._bad_reference(new)
        if reason:
            return Status.INVALID_OBJECT_ID, None, None, reason
        if new == old:
            return Status.SUCCESS, None, None, "unchanged"
        self._unstore(ref, old)
        self._store(ref, new)
        return Status.SUCCESS, old, new, ""

    # -- warm restart ---------------------------------------------------------------------

    def warm_adopt(self) -> int:
        """Read back what the hardware still holds after an agent restart and own it again.

        SAI restores its database on a warm boot; here the "ASIC" is the kernel, so the state
        is read back from it, after the ports and router interfaces have been re-created.
        Nothing is written to the hardware. Returns the number of objects adopted.
        """
        if not self.warm:
            raise ValueError("warm_adopt needs SAI_SWITCH_ATTR_RESTART_WARM=true")
        found = self.backend.discover()
        by_handle: dict[int, int] = {}
        adopted = 0
        for handle, (ip, lane) in found.next_hops.items():
            rif = self.router_interface_of_lane(lane)
            if rif is None:
                continue
            oid = self._adopt(T.NEXT_HOP, handle, NextHop(ip=ip_address(ip),
                                                          router_interface_id=rif))
            by_handle[handle] = oid
            adopted += 1
        for handle, members in found.groups.items():
            if not all(m in by_handle for m, _ in members):
                continue
            group = self._adopt(T.NEXT_HOP_GROUP, handle, NextHopGroup())
            by_handle[handle] = group
            for member, weight in members:
                self._store(make_oid(T.NEXT_HOP_GROUP_MEMBER, self._allocate()),
                            NextHopGroupMember(next_hop_group_id=group,
                                               next_hop_id=by_handle[member], weight=weight))
            adopted += 1
        adopted += self._adopt_srv6(found, by_handle)
        for prefix, (how, handle) in found.routes.items():
            target = (by_handle.get(handle) if how == "nh" else  # type: ignore[arg-type]
                      self.router_interface_of_lane(handle) if how == "lane" else None)  # type: ignore[arg-type]
            if how != "drop" and target is None:
                continue
            route = (RouteEntry(packet_action="SAI_PACKET_ACTION_DROP") if how == "drop"
                     else RouteEntry(next_hop_id=target))  # type: ignore[arg-type]
            key = RouteKey(self.default_vr, IpPrefix.parse(prefix))
            self._store(key, route)
            self.backend.adopt(key, 0)
            adopted += 1
        self.trace.record("warm", "adopt", self.switch_id, {},
                          Status.SUCCESS, f"{adopted} objects read back from {self.backend.name}")
        return adopted

    def _adopt_srv6(self, found: Discovery, by_handle: dict[int, int]) -> int:
        """SID lists with the next hops into them, then my-SID entries (an End.X's or
        End.DX*'s next hop is an adopted IP next hop, found by address and port, or by
        address alone where the SID is not on a port: the kernel path's are on a device of
        their own)."""
        adopted = 0
        for handle, listed in found.sid_lists.items():
            rif = self.router_interface_of_lane(listed.lane)
            if rif is None:
                continue
            sids = self._adopt(T.SRV6_SIDLIST, listed.handle, Srv6SidList(
                type=listed.type, segment_list=tuple(IPv6Address(s) for s in listed.segments)))
            by_handle[handle] = self._adopt(T.NEXT_HOP, handle, NextHop(
                type="SAI_NEXT_HOP_TYPE_SRV6_SIDLIST", router_interface_id=rif,
                srv6_sidlist_id=sids))
            adopted += 2
        hops = {(r.ip, r.router_interface_id): oid for oid, r in self._objects[T.NEXT_HOP].items()
                if isinstance(r, NextHop) and r.ip is not None}
        for sid, (behavior, crosses_to) in found.my_sids.items():
            hop = NULL_OID
            if crosses_to is not None:
                address, rif = ip_address(crosses_to[0]), self.router_interface_of_lane(
                    crosses_to[1])
                matching = [oid for (ip, on), oid in hops.items()
                            if ip == address and rif in (None, on)]
                if len(matching) != 1:
                    continue
                hop = matching[0]
            entry = MySidEntry(endpoint_behavior=behavior, next_hop_id=hop,
                               vrf=self.default_vr if looks_up(behavior) else NULL_OID)
            key = MySidKey(self.default_vr, IPv6Address(sid))
            self._store(key, entry)
            self.backend.adopt(key, 0)
            adopted += 1
        return adopted

    def _adopt(self, kind: ObjectType, handle: int, record: Record) -> int:
        oid = make_oid(kind, self._allocate())
        self._store(oid, record)
        self.backend.adopt(oid, handle)
        return oid


_ADMISSION = {T.BUFFER_PROFILE: SaiSwitch._admit_buffer_profile, T.PORT: SaiSwitch._admit_port,
              T.NEXT_HOP_GROUP_MEMBER: SaiSwitch._admit_member,
              T.INGRESS_PRIORITY_GROUP: SaiSwitch._admit_priority_group}
