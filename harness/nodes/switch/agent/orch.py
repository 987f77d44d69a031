"""Route orchestration: zebra's routes and nexthops in, the fewest SAI calls out.

Like SONiC's RouteOrch/NhgOrch. zebra's nexthop ids are not SAI objects: the agent resolves
each route to a *target* (drop, a router interface, one next hop, or a weighted set of next
hops) and shares SAI next hops and groups by content, so a route whose target did not change
costs no SAI call at all. That is what makes a warm restart free: after the agent reads the
kernel back, zebra's full replay finds every route already in place and nothing is written;
routes the replay did not confirm are swept once it has settled.

A change that fails in SAI (an injected fault, a full table) is remembered and retried, and
counted as a reason for the node to be degraded; FRR is never told, as with a real ASIC.

Precedence, one rule: a prefix the configuration channel declares (agent/config.py: a TE
policy, a static route of the switch) is the configuration's. zebra's route for the same
prefix is kept in `wanted` but not programmed while the configuration holds it, and takes
over, with no gap, as soon as the configuration lets the prefix go.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from harness.nodes.switch.agent.decode import (
    Event,
    Hop,
    NexthopUpdate,
    RouteDelete,
    RouteUpdate,
)
from harness.nodes.switch.sai.api import SaiSwitch
from harness.nodes.switch.sai.records import NextHop, NextHopGroupMember, RouteEntry
from harness.nodes.switch.sai.status import Status
from harness.nodes.switch.sai.types import NULL_OID, IpPrefix, ObjectType, RouteKey, oid_type

T = ObjectType
log = logging.getLogger("agent.orch")
NhKey = tuple[str, int]  # (gateway, router interface oid)
Target = tuple[Any, ...]  # ("drop",) | ("rif", oid) | ("nh", NhKey) | ("group", frozenset)
#                          | ("config", oid): a next hop the configuration channel owns
DROP: Target = ("drop",)
Plan = tuple[Target | str, int | None, dict[str, Any]]
FORWARD, DROP_ACTION = "SAI_PACKET_ACTION_FORWARD", "SAI_PACKET_ACTION_DROP"
ACTION, NEXT_HOP_ID = "SAI_ROUTE_ENTRY_ATTR_PACKET_ACTION", "SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID"


@dataclass
class RouteOrch:
    sai: SaiSwitch
    rif_by_ifindex: dict[int, int] = field(default_factory=dict)
    zebra_nexthops: dict[int, NexthopUpdate] = field(default_factory=dict)
    wanted: dict[IpPrefix, RouteUpdate] = field(default_factory=dict)  # zebra's FIB
    programmed: dict[IpPrefix, Target] = field(default_factory=dict)  # what SAI holds
    failed: dict[IpPrefix, str] = field(default_factory=dict)  # -> SAI status, retried
    skipped: dict[IpPrefix, str] = field(default_factory=dict)  # -> why it has no target
    stale: set[IpPrefix] = field(default_factory=set)  # adopted, not yet confirmed by zebra
    next_hops: dict[NhKey, int] = field(default_factory=dict)
    groups: dict[frozenset, int] = field(default_factory=dict)
    pinned: set[IpPrefix] = field(default_factory=set)  # prefixes the configuration owns
    # Asked of each new prefix zebra brings before it is programmed: True when the
    # configuration pinned it now (a TE policy's prefix holds it), so it never takes zebra's
    # path first, even for a moment.
    claim: Callable[[IpPrefix], bool] | None = None
    calls_saved: int = 0
    overridden: int = 0  # zebra changes kept back because the configuration owns the prefix

    # -- zebra events ---------------------------------------------------------------------

    def apply(self, events: Iterable[Event]) -> None:
        """One batch (one socket read): the last event per prefix wins, so zebra's
        delete-then-add of an update is one SAI set, never a withdraw."""
        changes: dict[IpPrefix, RouteUpdate | RouteDelete] = {}
        dropped_nexthops = []
        by_nexthop: dict[int, list[IpPrefix]] | None = None  # made when first needed
        for event in events:
            if isinstance(event, RouteUpdate | RouteDelete):  # the bulk of every batch
                changes[event.prefix] = event
            elif isinstance(event, NexthopUpdate):
                self.zebra_nexthops[event.id] = event
                if by_nexthop is None:
                    by_nexthop = self._routes_by_nexthop()
                for prefix in self._users_of(event.id, by_nexthop):
                    changes.setdefault(prefix, self.wanted[prefix])
            else:
                dropped_nexthops.append(event.id)
        self._program(changes)
        for nh_id in dropped_nexthops:
            self.zebra_nexthops.pop(nh_id, None)
        self.collect_garbage()

    def retry(self) -> None:
        if self.failed:
            self._program({p: self.wanted[p] for p in self.failed if p in self.wanted})
            self.collect_garbage()

    def sweep_stale(self) -> int:
        """After a replay: remove what the kernel held but zebra no longer has."""
        stale, self.stale = sorted(self.stale), set()
        if stale:
            self._program({p: RouteDelete(p) for p in stale})
            self.collect_garbage()
        return len(stale)

    def _routes_by_nexthop(self) -> dict[int, list[IpPrefix]]:
        """zebra nexthop id -> the routes that name it. Once per batch, not per nexthop
        update: a failover updates many groups at once, and a FIB holds thousands of routes."""
        routes: dict[int, list[IpPrefix]] = defaultdict(list)
        for prefix, route in self.wanted.items():
            if route.nh_id:
                routes[route.nh_id].append(prefix)
        return routes

    def _users_of(self, nh_id: int, by_nexthop: dict[int, list[IpPrefix]]) -> list[IpPrefix]:
        """The routes that use a nexthop, directly or through a group holding it."""
        groups = [g.id for g in self.zebra_nexthops.values()
                  if any(m == nh_id for m, _ in g.group)]
        return [p for n in (nh_id, *groups) for p in by_nexthop.get(n, ())]

    # -- resolution -----------------------------------------------------------------------

    def resolve(self, route: RouteUpdate) -> Target | str:
        if route.blackhole:
            return DROP
        hops: tuple[Hop, ...] = route.hops
        if route.nh_id:
            nexthop = self.zebra_nexthops.get(route.nh_id)
            if nexthop is None:
                return f"zebra nexthop {route.nh_id} unknown"
            if nexthop.blackhole:
                return DROP
            if nexthop.group:
                members = [(self.zebra_nexthops.get(m), w) for m, w in nexthop.group]
                if any(n is None or n.hop is None for n, _ in members):
                    return f"zebra group {route.nh_id} has unknown members"
                hops = tuple(Hop(n.hop.gateway, n.hop.ifindex, w)  # type: ignore[union-attr]
                             for n, w in members)
            else:
                hops = (nexthop.hop,) if nexthop.hop else ()
        if not hops:
            return "no next hop"
        keys = []
        for hop in hops:
            rif = self.rif_by_ifindex.get(hop.ifindex)
            if rif is None:
                return f"ifindex {hop.ifindex} is not a port (local delivery stays in the kernel)"
            if hop.gateway is None:
                if len(hops) == 1:
                    return ("rif", rif)
                return "a connected next hop inside a group"
            keys.append(((hop.gateway, rif), hop.weight))
        if len(keys) == 1:
            return ("nh", keys[0][0])
        return ("group", frozenset(keys))

    # -- programming ----------------------------------------------------------------------

    def _program(self, changes: dict[IpPrefix, RouteUpdate | RouteDelete]) -> None:
        """Routes of one batch mostly share a zebra nexthop (a FIB download: thousands of
        routes via one group), so a nexthop's target and its SAI object are worked out once."""
        creates: list[tuple[IpPrefix, RouteKey, Target, dict[str, Any]]] = []
        sets: list[tuple[IpPrefix, RouteKey, Target, list[tuple[str, Any]]]] = []
        removes: list[tuple[IpPrefix, RouteKey]] = []
        plans: dict[int, Plan] = {}  # zebra nexthop id -> plan
        for prefix, change in changes.items():
            if self.stale:
                self.stale.discard(prefix)
            if (self.claim is not None and isinstance(change, RouteUpdate)
                    and prefix not in self.pinned and prefix not in self.programmed):
                self.claim(prefix)
            if self.pinned and prefix in self.pinned:
                self._keep_back(prefix, change)
                continue
            if isinstance(change, RouteDelete):
                self.wanted.pop(prefix, None)
                self.failed.pop(prefix, None)
                self.skipped.pop(prefix, None)
                if prefix in self.programmed:
                    removes.append((prefix, self._key(change)))
                continue
            self.wanted[prefix] = change
            shared = change.nh_id and not change.blackhole
            plan = plans.get(change.nh_id) if shared else None
            if plan is None:
                plan = self._plan(change)
                if shared:
                    plans[change.nh_id] = plan
            target, oid, attrs = plan
            if isinstance(target, str):
                self.skipped[prefix] = target
                self.failed.pop(prefix, None)
                if prefix in self.programmed:
                    removes.append((prefix, self._key(change)))
                continue
            if self.skipped:
                self.skipped.pop(prefix, None)
            current = self.programmed.get(prefix)
            if current == target:
                if self.failed:
                    self.failed.pop(prefix, None)
                self.calls_saved += 1
            elif oid is None:
                self.failed[prefix] = "next hop objects could not be created"
            elif current is None:
                creates.append((prefix, self._key(change), target, attrs))
            else:
                sets.append((prefix, self._key(change), target,
                             self._transition(current, target, oid)))
        self._commit(creates, sets, removes)

    def _keep_back(self, prefix: IpPrefix, change: RouteUpdate | RouteDelete) -> None:
        """zebra's word on a configured prefix: remembered for when the configuration lets go."""
        if isinstance(change, RouteDelete):
            self.wanted.pop(prefix, None)
        else:
            self.wanted[prefix] = change
        self.overridden += 1

    # -- the configuration's routes -------------------------------------------------------

    def pin(self, prefix: IpPrefix, attrs: dict[str, Any]) -> Status:
        """Program a configured route, over whatever zebra had there; the prefix is the
        configuration's until `unpin`. Moves between targets without passing through
        nothing, as `_transition` does for zebra's routes."""
        key = RouteKey(self.sai.default_vr, prefix)
        action, next_hop = attrs.get(ACTION, FORWARD), attrs.get(NEXT_HOP_ID, NULL_OID)
        self.pinned.add(prefix)
        self.stale.discard(prefix)
        self.failed.pop(prefix, None)
        self.skipped.pop(prefix, None)
        current = self.sai.record(key)
        if current is None:
            status = self.sai.create(T.ROUTE_ENTRY, attrs, key)[0]
        elif (current.packet_action, current.next_hop_id) == (action, next_hop):  # type: ignore[attr-defined]
            status = Status.SUCCESS
        else:
            steps = ([(ACTION, action), (NEXT_HOP_ID, next_hop)] if action != FORWARD
                     else [(NEXT_HOP_ID, next_hop), (ACTION, action)])
            status = next((s for s in self.sai.set_bulk([(key, n, v) for n, v in steps])
                           if not s.ok), Status.SUCCESS)
        if status.ok:
            self.programmed[prefix] = DROP if action == DROP_ACTION else ("config", next_hop)
            self.collect_garbage()  # zebra's next hops the route no longer uses
        return status

    def unpin(self, prefix: IpPrefix) -> None:
        """Hand a prefix back: zebra's route for it is programmed, or the route goes."""
        self.pinned.discard(prefix)
        route = self.wanted.get(prefix)
        self._program({prefix: route if route is not None else RouteDelete(prefix)})
        self.collect_garbage()

    def _plan(self, route: RouteUpdate) -> Plan:
        """Where a route goes: its target (or why it has none), the SAI object that reaches
        the target (None: it could not be created) and the route's attributes."""
        target = self.resolve(route)
        if isinstance(target, str):
            return target, None, {}
        oid = self._ensure(target)
        return target, oid, ({"SAI_ROUTE_ENTRY_ATTR_PACKET_ACTION": DROP_ACTION}
                             if target == DROP else {"SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID": oid})

    @staticmethod
    def _transition(current: Target, target: Target, oid: int) -> list[tuple[str, Any]]:
        """The SAI sets that move a route between targets without passing through nothing."""
        if target == DROP:
            return [("SAI_ROUTE_ENTRY_ATTR_PACKET_ACTION", DROP_ACTION),
                    ("SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID", NULL_OID)]
        if current == DROP:
            return [("SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID", oid),
                    ("SAI_ROUTE_ENTRY_ATTR_PACKET_ACTION", FORWARD)]
        return [("SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID", oid)]

    def _key(self, change: RouteUpdate | RouteDelete) -> RouteKey:
        return RouteKey(self.sai.default_vr, change.prefix)

    def _commit(self, creates: list[tuple[IpPrefix, RouteKey, Target, dict[str, Any]]],
                sets: list[tuple[IpPrefix, RouteKey, Target, list[tuple[str, Any]]]],
                removes: list[tuple[IpPrefix, RouteKey]]) -> None:
        """Removes, creates and sets each go to SAI as one bulk call."""
        if removes:
            for (prefix, _), status in zip(removes, self.sai.remove_bulk(
                    [key for _, key in removes]), strict=True):
                if status.ok:
                    del self.programmed[prefix]
                else:
                    self.failed[prefix] = str(status)
        if creates:
            results = self.sai.create_bulk(T.ROUTE_ENTRY,
                                           [(key, attrs) for _, key, _, attrs in creates])
            for (prefix, _, target, _), (status, _ref) in zip(creates, results, strict=True):
                self._settle(prefix, target, status)
        if sets:
            statuses = iter(self.sai.set_bulk([(key, name, value) for _, key, _, steps in sets
                                               for name, value in steps]))
            for prefix, _, target, steps in sets:
                mine = [next(statuses) for _ in steps]
                bad = next((s for s in mine if not s.ok), None)
                self._settle(prefix, target if bad is None else self.programmed[prefix],
                             bad or mine[0])

    def _settle(self, prefix: IpPrefix, target: Target, status: Status) -> None:
        if status is Status.SUCCESS:
            self.programmed[prefix] = target
            if self.failed:
                self.failed.pop(prefix, None)
        else:
            self.failed[prefix] = str(status)

    def _ensure(self, target: Target) -> int | None:
        """The SAI object a route to `target` points at, created if it does not exist."""
        if target == DROP:
            return NULL_OID
        if target[0] == "rif":
            return target[1]
        if target[0] == "nh":
            return self._ensure_next_hop(target[1])
        return self._ensure_group(target[1])

    def _ensure_next_hop(self, key: NhKey) -> int | None:
        if key in self.next_hops:
            return self.next_hops[key]
        status, oid = self.sai.create(T.NEXT_HOP, {
            "SAI_NEXT_HOP_ATTR_TYPE": "SAI_NEXT_HOP_TYPE_IP", "SAI_NEXT_HOP_ATTR_IP": key[0],
            "SAI_NEXT_HOP_ATTR_ROUTER_INTERFACE_ID": key[1]})
        if not status.ok:
            return None
        self.next_hops[key] = oid  # type: ignore[assignment]
        return oid  # type: ignore[return-value]

    def _ensure_group(self, members: frozenset) -> int | None:
        if members in self.groups:
            return self.groups[members]
        hops = [(self._ensure_next_hop(key), weight) for key, weight in sorted(members)]
        if any(oid is None for oid, _ in hops):
            return None
        status, group = self.sai.create(T.NEXT_HOP_GROUP, {
            "SAI_NEXT_HOP_GROUP_ATTR_TYPE": "SAI_NEXT_HOP_GROUP_TYPE_ECMP"})
        if not status.ok:
            return None
        results = self.sai.create_bulk(T.NEXT_HOP_GROUP_MEMBER, [(None, {
            "SAI_NEXT_HOP_GROUP_MEMBER_ATTR_NEXT_HOP_GROUP_ID": group,
            "SAI_NEXT_HOP_GROUP_MEMBER_ATTR_NEXT_HOP_ID": oid,
            "SAI_NEXT_HOP_GROUP_MEMBER_ATTR_WEIGHT": weight}) for oid, weight in hops])
        self.groups[members] = group  # type: ignore[assignment]
        if not all(s.ok for s, _ in results):
            self._remove_group(members)
            return None
        return group  # type: ignore[return-value]

    def _remove_group(self, members: frozenset) -> bool:
        group = self.groups[members]
        self.sai.remove_bulk(list(self.sai.members(group)))
        if self.sai.remove(group).ok:
            del self.groups[members]
            return True
        return False

    def collect_garbage(self) -> None:
        """Remove next-hop groups, then next hops, that no route uses any more."""
        for members, group in list(self.groups.items()):
            if self.sai.refcount(group) == len(self.sai.members(group)):
                self._remove_group(members)
        for key, oid in list(self.next_hops.items()):
            if self.sai.refcount(oid) == 0 and self.sai.remove(oid).ok:
                del self.next_hops[key]

    # -- warm restart ---------------------------------------------------------------------

    def adopt(self, foreign: Collection[int] = ()) -> None:
        """Rebuild targets from the SAI objects a warm start read back; all start stale.
        `foreign`: next hops and groups the configuration channel claimed, not ours to share
        or collect; a route to one is ("config", oid) until the configuration pins it."""
        hops = {oid: (str(r.ip), r.router_interface_id)
                for oid, r in self.sai.objects(T.NEXT_HOP).items()
                if isinstance(r, NextHop) and r.ip is not None}
        self.next_hops = {key: oid for oid, key in hops.items()  # type: ignore[misc]
                          if oid not in foreign}
        for group in self.sai.objects(T.NEXT_HOP_GROUP):
            if group in foreign:
                continue
            members = frozenset((hops[m.next_hop_id], m.weight)
                                for m in self.sai.members(group).values()  # type: ignore[arg-type]
                                if isinstance(m, NextHopGroupMember))
            self.groups[members] = group  # type: ignore[assignment]
        by_oid = {oid: ("nh", key) for oid, key in hops.items()}
        by_oid.update({oid: ("group", members) for members, oid in self.groups.items()})
        for key, route in self.sai.objects(T.ROUTE_ENTRY).items():
            assert isinstance(route, RouteEntry) and isinstance(key, RouteKey)
            target = (DROP if route.packet_action == DROP_ACTION
                      else ("rif", route.next_hop_id)
                      if oid_type(route.next_hop_id) is T.ROUTER_INTERFACE
                      else by_oid.get(route.next_hop_id, ("config", route.next_hop_id)))
            self.programmed[key.destination] = target
        self.stale = set(self.programmed)
