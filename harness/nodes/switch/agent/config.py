"""The switch's configuration channel, SONiC's CONFIG_DB role: what FPM does not carry.

Routes come from zebra over FPM. Everything else a switch is told (port speeds, buffer pools
and profiles with their PFC headroom, QoS maps, SRv6 SIDs, SID lists and TE routes) is a
declared document, `sai-config.json` in the node's directory. The plan renders it at deploy;
users and tools may edit it; the agent applies it at start and on `labctl sai NODE apply`.

The document is SAI's own vocabulary, one entry per object, keyed `TYPE|name`:

    {"PORT|eth1": {"SAI_PORT_ATTR_SPEED": 400000},
     "BUFFER_POOL|ingress": {"SAI_BUFFER_POOL_ATTR_TYPE": "SAI_BUFFER_POOL_TYPE_INGRESS",
                             "SAI_BUFFER_POOL_ATTR_SIZE": 33554432},
     "NEXT_HOP|via-spine1": {"SAI_NEXT_HOP_ATTR_TYPE": "SAI_NEXT_HOP_TYPE_IP",
                             "SAI_NEXT_HOP_ATTR_IP": "10.1.0.1",
                             "SAI_NEXT_HOP_ATTR_ROUTER_INTERFACE_ID": "ROUTER_INTERFACE|eth1"},
     "ROUTE_ENTRY|10.99.0.0/24": {"SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID": "NEXT_HOP|via-spine1"}}

An attribute that points at an object names that object's key. Ports, their router
interfaces and the default virtual router exist before any configuration (`PORT|eth1`,
`ROUTER_INTERFACE|eth1`, `VIRTUAL_ROUTER|default`): the document only sets their attributes,
and an attribute it stops naming goes back to the value the switch booted with. Route and
my-SID entries are keyed by what they match (`ROUTE_ENTRY|PREFIX`, `MY_SID_ENTRY|SID`); a
configured route owns its prefix over zebra's (agent/orch.py says the rule).

Applying is a diff against what the switch holds: the whole document is checked first (a bad
one changes nothing), then objects are created, set or replaced (a create-only attribute
changed) in dependency order, and the ones the document dropped are removed, referrers first.
A warm restart loses nothing: the kernel's next hops and routes are claimed back by content,
and objects the kernel cannot hold (pools, profiles, maps) are made again from the document,
which writes nothing to the kernel.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from graphlib import TopologicalSorter
from ipaddress import IPv6Address, ip_network
from pathlib import Path
from typing import Any

from harness.nodes.switch.agent.orch import RouteOrch
from harness.nodes.switch.sai.api import SaiSwitch
from harness.nodes.switch.sai.backend import Ref
from harness.nodes.switch.sai.records import RECORDS, Record, build, with_attr
from harness.nodes.switch.sai.status import Status
from harness.nodes.switch.sai.types import IpPrefix, MySidKey, ObjectType, RouteKey, make_oid

T = ObjectType
# Objects the switch has before any configuration, named by interface (or "default").
BOUND = (T.PORT, T.ROUTER_INTERFACE, T.VIRTUAL_ROUTER)
# Entries keyed by what they match rather than by an object id.
KEYED = (T.ROUTE_ENTRY, T.MY_SID_ENTRY)
CREATED = (T.NEXT_HOP, T.NEXT_HOP_GROUP, T.NEXT_HOP_GROUP_MEMBER, T.SRV6_SIDLIST,
           T.BUFFER_POOL, T.BUFFER_PROFILE, T.INGRESS_PRIORITY_GROUP, T.QOS_MAP, T.WRED,
           T.QUEUE)
CONFIGURABLE = (*BOUND, *KEYED, *CREATED)
# What a warm start reads back from the kernel besides routes, so it is claimed, not made.
IN_KERNEL = (T.NEXT_HOP, T.NEXT_HOP_GROUP, T.NEXT_HOP_GROUP_MEMBER, T.SRV6_SIDLIST,
             T.MY_SID_ENTRY)
# Made by the configuration only (zebra makes none): claimed whoever points at them, and
# removed after a warm start when the configuration no longer declares them.
CONFIG_ONLY = (T.SRV6_SIDLIST, T.MY_SID_ENTRY)


class ConfigError(ValueError):
    """A document that cannot be applied; says where (file:line, key, attribute) and the fix."""


@dataclass(frozen=True)
class Entry:
    """One declared object: its key, type, name and attributes as written (a reference is the
    key of the object it points at)."""

    key: str
    kind: ObjectType
    name: str
    attrs: dict[str, Any]

    @property
    def references(self) -> dict[str, str]:
        """Attribute -> the key it names."""
        cls = RECORDS[self.kind]
        return {name: value for name, value in self.attrs.items()
                if cls.BY_NAME[name].refs and isinstance(value, str)}


@dataclass
class Change:
    action: str  # create | set | replace | remove
    key: str
    detail: str = ""
    status: str = ""  # empty: planned only (dry run)

    def __str__(self) -> str:
        done = f" -> {self.status}" if self.status else ""
        return f"{self.action} {self.key}{' ' + self.detail if self.detail else ''}{done}"


# -- the document -----------------------------------------------------------------------------


def _line(text: str, *needles: str) -> int:
    """The line of the last needle, searched in order (a key, then an attribute under it)."""
    offset = 0
    for needle in needles:
        found = text.find(json.dumps(needle), offset)
        if found < 0:
            break
        offset = found
    return text.count("\n", 0, offset) + 1


def parse(text: str, source: str, bound: set[str]) -> dict[str, Entry]:
    """The document's entries in dependency order (an object after those it points at).
    `bound`: the keys of the objects the switch already has (its ports...)."""
    def fail(message: str, fix: str, *where: str) -> ConfigError:
        return ConfigError(f"{source}:{_line(text, *where)}: {' '.join(where) or 'document'}: "
                           f"{message}; {fix}")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None
    if not isinstance(document, dict):
        raise fail("the document is not an object", 'write {"TYPE|name": {attributes}}')
    entries = {key: _entry(key, attrs, fail) for key, attrs in document.items()}
    for entry in entries.values():
        for name, target in entry.references.items():
            allowed = RECORDS[entry.kind].BY_NAME[name].refs
            if target not in entries and target not in bound:
                close = difflib.get_close_matches(target, [*entries, *bound], n=1)
                raise fail(f"{target!r} names no object of this document or the switch",
                           f"did you mean {close[0]!r}?" if close else
                           f"declare it, or name one of {', '.join(sorted(bound)[:6])}",
                           entry.key, name)
            if target.split("|")[0] not in (k.name for k in allowed):
                raise fail(f"{target!r} is not a {' or '.join(k.name for k in allowed)}",
                           "name an object of the type the attribute takes", entry.key, name)
        if entry.kind in BOUND and entry.key not in bound:
            same_type = sorted(k for k in bound if k.startswith(f"{entry.kind.name}|"))
            raise fail(f"the switch has no {entry.key}", f"name one of {', '.join(same_type)}",
                       entry.key)
    _check_buffers(entries, fail)
    # SAI's references form no circle (a type points only at types it cannot be pointed at
    # by), and the checks above kept each reference to its type: the order always exists.
    order = TopologicalSorter({key: set(e.references.values()) & set(entries)
                               for key, e in entries.items()}).static_order()
    return {key: entries[key] for key in order}


def _check_buffers(entries: dict[str, Entry], fail: Any) -> None:
    """A buffer profile must fit its pool: its static threshold, and its reserved buffer
    plus headroom, each within the pool's size (SAI refuses the create otherwise)."""
    for entry in entries.values():
        pool = entries.get(entry.attrs.get("SAI_BUFFER_PROFILE_ATTR_POOL_ID", "")) \
            if entry.kind is T.BUFFER_PROFILE else None
        if pool is None:
            continue
        size = pool.attrs.get("SAI_BUFFER_POOL_ATTR_SIZE", 0)
        static = entry.attrs.get("SAI_BUFFER_PROFILE_ATTR_SHARED_STATIC_TH", 0)
        footprint = (entry.attrs.get("SAI_BUFFER_PROFILE_ATTR_RESERVED_BUFFER_SIZE", 0)
                     + entry.attrs.get("SAI_BUFFER_PROFILE_ATTR_XOFF_TH", 0))
        for name, value, what in (
                ("SAI_BUFFER_PROFILE_ATTR_SHARED_STATIC_TH", static, "the static threshold"),
                ("SAI_BUFFER_PROFILE_ATTR_XOFF_TH", footprint, "reserved buffer plus headroom")):
            if value > size:
                raise fail(f"{what} ({value} B) exceeds {pool.key}'s size ({size} B)",
                           "lower it, or give the pool more", entry.key, name)


def _entry(key: Any, attrs: Any, fail: Any) -> Entry:
    """One entry, checked as SAI would check its create (or set, for a bound object)."""
    type_name, _, name = str(key).partition("|")
    kind = ObjectType.__members__.get(type_name)
    if kind not in CONFIGURABLE or not name:
        raise fail(f"{key!r} is not TYPE|name with a configurable TYPE",
                   f"TYPE is one of {', '.join(k.name for k in CONFIGURABLE)}", str(key))
    if not isinstance(attrs, dict):
        raise fail("attributes must be an object", '{"SAI_..._ATTR_...": value}', key)
    cls = RECORDS[kind]
    for attr_name in attrs:
        if attr_name not in cls.BY_NAME:
            close = difflib.get_close_matches(attr_name, cls.BY_NAME, n=1)
            raise fail(f"{attr_name} is not an attribute of {kind}",
                       f"did you mean {close[0]}?" if close else
                       f"use one of {', '.join(cls.BY_NAME)}", key, attr_name)
    entry = Entry(key, kind, name, attrs)
    problem = _check_name(entry) or _check_values(entry)
    if problem:
        attr_name, message = problem
        raise fail(message, "fix the value", key, *([attr_name] if attr_name else []))
    return entry


def _check_name(entry: Entry) -> tuple[str | None, str] | None:
    try:
        if entry.kind is T.ROUTE_ENTRY:
            ip_network(entry.name, strict=True)
        elif entry.kind is T.MY_SID_ENTRY:
            IPv6Address(entry.name)
    except ValueError as exc:
        return None, f"{entry.name!r} is not what {entry.kind.name} is keyed by: {exc}"
    return None


def _check_values(entry: Entry) -> tuple[str | None, str] | None:
    """Every value parsed and the record's own rules kept, with stand-in object ids."""
    stand_in = {name: make_oid(RECORDS[entry.kind].BY_NAME[name].refs[0], 1)
                for name in entry.references}
    attrs = {**entry.attrs, **stand_in}
    if entry.kind in BOUND:
        record: Record | str = RECORDS[entry.kind]()
        for name, value in attrs.items():
            status, record = with_attr(record, name, value)  # type: ignore[arg-type]
            if not status.ok:
                return name, str(record)
        return None
    status, result = build(entry.kind, attrs)
    return None if status.ok else (None, str(result))


def read(path: Path, bound: set[str]) -> tuple[dict[str, Entry], str]:
    """The document at `path` and its text; none there is an empty one."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}, "{}"
    return parse(text, str(path), bound), text


def applied_path(path: Path) -> Path:
    """Where the agent keeps the last document it applied: a switch OS's saved config, which
    it falls back to when the one on disk is refused at start."""
    return path.with_name(path.stem + ".applied.json")


# -- applying it ------------------------------------------------------------------------------


@dataclass
class ConfigOrch:
    """What the configuration channel has put in the switch, and the diff to a new document."""

    sai: SaiSwitch
    routes: RouteOrch
    bound: dict[str, Ref] = field(default_factory=dict)  # PORT|eth1 -> the port's oid
    applied: dict[str, Entry] = field(default_factory=dict)  # as declared, once in the switch
    refs: dict[str, Ref] = field(default_factory=dict)  # key -> the object made for it
    base: dict[str, dict[str, Any]] = field(default_factory=dict)  # bound key -> boot attrs
    failed: dict[str, str] = field(default_factory=dict)  # key -> why, tried again next apply

    # -- warm start -----------------------------------------------------------------------

    def claim(self, entries: dict[str, Entry]) -> set[int]:
        """Take back, by content, the next hops and groups a warm start read from the kernel,
        before the route orchestrator adopts the rest. A group looks like any other, so it is
        claimed only through a configured route still pointing at it, which also picks the
        right one of two alike next hops, the configuration's and zebra's; without such a
        route only a next hop nothing uses is taken. Returns them."""
        hints: dict[str, int] = {}
        for entry in entries.values():
            record = self.sai.record(_entry_key(self.sai, entry)) if entry.kind in KEYED else None
            for name, target in entry.references.items():
                if record is not None and name.endswith("_NEXT_HOP_ID"):
                    hints[target] = getattr(record, RECORDS[entry.kind].BY_NAME[name].field)
        claimed: set[Ref] = set()
        for key, entry in entries.items():
            if entry.kind not in IN_KERNEL:
                continue
            attrs = self.resolve(entry, {**self.bound, **self.refs})
            if attrs is None:
                continue
            status, want = build(entry.kind, attrs)
            alike = [oid for oid, record in self.sai.objects(entry.kind).items()
                     if record == want and oid not in claimed
                     and (entry.kind not in KEYED or oid == _entry_key(self.sai, entry))]
            hint = hints.get(key)
            # Unhinted, only what nothing uses: a next hop alike in content may be zebra's,
            # in its groups, and taking it would take it from them.
            pick = hint if hint in alike else None if entry.kind is T.NEXT_HOP_GROUP else \
                next(iter(alike), None) if entry.kind in CONFIG_ONLY else \
                next((oid for oid in alike if not self.sai.refcount(oid)), None)
            if status.ok and pick is not None:
                self.refs[key], self.applied[key] = pick, entry
                claimed.add(pick)
        for sid in [k for k in self.sai.objects(T.MY_SID_ENTRY) if k not in claimed]:
            self.sai.remove(sid)  # a SID the document dropped while the agent was down
        return {ref for ref in claimed if isinstance(ref, int)}

    def collect(self) -> int:
        """Remove what a warm start read back and the configuration did not claim, once
        nothing points at it: SRv6 next hops (their routes go with zebra's stale sweep), then
        SID lists. Returns how many went."""
        mine = set(self.refs.values())
        gone = 0
        for kind in (T.NEXT_HOP, T.SRV6_SIDLIST):
            for oid, record in list(self.sai.objects(kind).items()):
                srv6 = kind is T.SRV6_SIDLIST or getattr(record, "srv6_sidlist_id", 0)
                if srv6 and oid not in mine and not self.sai.refcount(oid) \
                        and self.sai.remove(oid).ok:
                    gone += 1
        return gone

    # -- the diff ---------------------------------------------------------------------------

    def apply(self, entries: dict[str, Entry], *, dry_run: bool = False) -> list[Change]:
        """Make the switch hold `entries`; returns the changes (planned only, on a dry run)."""
        run = _Run(self, dry_run)
        for key, entry in entries.items():
            run.reach(key, entry)
        for key in _referrers_first({k: e for k, e in self.applied.items() if k not in entries}):
            run.drop(key)
        for key, old in run.retired:
            run.remove(key, old, "the object it replaced")
        if not dry_run:
            self.collect()
        return run.changes

    def resolve(self, entry: Entry, refs: dict[str, Ref]) -> dict[str, Any] | None:
        """Attributes with references made object ids; None if one points at nothing yet."""
        attrs = dict(entry.attrs)
        for name, target in entry.references.items():
            if target not in refs:
                return None
            attrs[name] = refs[target]
        return attrs

    def status(self) -> dict[str, Any]:
        return {"objects": len(self.applied), "failed": dict(self.failed)}


class _Run:
    """One apply: the live key -> object map as it moves, and the changes made."""

    def __init__(self, orch: ConfigOrch, dry_run: bool) -> None:
        self.orch, self.sai, self.dry_run = orch, orch.sai, dry_run
        self.live: dict[str, Ref] = {**orch.bound, **orch.refs}
        self.changes: list[Change] = []
        self.retired: list[tuple[str, Ref]] = []  # replaced objects, removed at the end

    def note(self, action: str, key: str, detail: str, status: Status | None) -> bool:
        ok = status is None or status.ok
        self.changes.append(Change(action, key, detail, "" if status is None else str(status)))
        if status is not None and not ok:
            self.orch.failed[key] = f"{' '.join(filter(None, (action, detail)))}: {status}"
        return ok

    def reach(self, key: str, entry: Entry) -> None:
        attrs = self.orch.resolve(entry, self.live)
        if attrs is None:
            missing = [t for t in entry.references.values() if t not in self.live]
            self.orch.failed[key] = f"points at {', '.join(missing)}, which could not be made"
            self.changes.append(Change("skip", key, self.orch.failed[key]))
            return
        self.orch.failed.pop(key, None)
        if entry.kind in BOUND:
            self.set_bound(key, entry, attrs)
        elif entry.kind is T.ROUTE_ENTRY:
            self.route(key, entry, attrs)
        elif key not in self.orch.refs:
            self.create(key, entry, attrs)
        else:
            self.update(key, entry, attrs)

    def set_bound(self, key: str, entry: Entry, attrs: dict[str, Any]) -> None:
        ref = self.orch.bound[key]
        record = self.sai.record(ref)
        assert record is not None
        base = self.orch.base.setdefault(key, record.attrs())
        want = {**base, **attrs}
        self.set_attrs(key, entry, ref, record, want)

    def set_attrs(self, key: str, entry: Entry, ref: Ref, record: Record,
                  want: dict[str, Any]) -> None:
        current = record.attrs()
        ok = True
        for name, value in want.items():
            if current.get(name) != _parsed(record, name, value):
                status = None if self.dry_run else self.sai.set(ref, name, value)
                ok &= self.note("set", key, f"{name}={_show(entry, name, value)}", status)
        if ok and not self.dry_run:
            self.orch.applied[key] = entry

    def route(self, key: str, entry: Entry, attrs: dict[str, Any]) -> None:
        prefix = IpPrefix.parse(entry.name)
        record = self.sai.record(RouteKey(self.sai.default_vr, prefix))
        pinned = prefix in self.orch.routes.pinned
        if pinned and record is not None and _same(record, entry.kind, attrs):
            return
        action = "set" if pinned else "create"
        detail = "(over zebra's route)" if not pinned and prefix in self.orch.routes.wanted \
            else ""
        status = None if self.dry_run else self.orch.routes.pin(prefix, attrs)
        if self.note(action, key, detail, status) and not self.dry_run:
            self.orch.applied[key] = entry

    def create(self, key: str, entry: Entry, attrs: dict[str, Any]) -> Ref | None:
        if self.dry_run:
            self.live[key] = make_oid(entry.kind, (1 << 40) + len(self.changes))
            self.note("create", key, "", None)
            return None
        status, ref = self.sai.create(entry.kind, attrs, _entry_key(self.sai, entry))
        if self.note("create", key, "", status) and ref is not None:
            self.live[key] = self.orch.refs[key] = ref
            self.orch.applied[key] = entry
        return ref

    def update(self, key: str, entry: Entry, attrs: dict[str, Any]) -> None:
        ref = self.orch.refs[key]
        record = self.sai.record(ref)
        assert record is not None
        status, want = build(entry.kind, attrs)
        if not isinstance(want, Record):
            self.note("set", key, want, status)
            return
        changed = [a for a in record.ATTRS if getattr(record, a.field) != getattr(want, a.field)]
        if any(a.create_only for a in changed):
            self.replace(key, entry, attrs, ref)
        elif changed:
            self.set_attrs(key, entry, ref, record, {a.name: attrs.get(a.name, getattr(
                want, a.field)) for a in changed})
        elif not self.dry_run:
            self.orch.applied[key] = entry

    def replace(self, key: str, entry: Entry, attrs: dict[str, Any], old: Ref) -> None:
        """A create-only attribute changed: a new object; the old one goes once nothing
        points at it. An entry keyed by what it matches cannot exist twice: removed first."""
        if entry.kind in KEYED:
            self.remove(key, old, "to create it anew")
            self.create(key, entry, attrs)
            return
        if self.create(key, entry, attrs) is not None or self.dry_run:
            self.retired.append((key, old))

    def drop(self, key: str) -> None:
        entry = self.orch.applied[key]
        if entry.kind in BOUND:
            ref = self.orch.bound[key]
            record = self.sai.record(ref)
            assert record is not None
            self.set_attrs(key, entry, ref, record, self.orch.base.get(key, {}))
            if not self.dry_run and key not in self.orch.failed:
                del self.orch.applied[key]
                self.orch.base.pop(key, None)
        elif entry.kind is T.ROUTE_ENTRY:
            if not self.dry_run:
                self.orch.routes.unpin(IpPrefix.parse(entry.name))
                del self.orch.applied[key]
            self.note("remove", key, "(zebra's route, if any, takes over)",
                      None if self.dry_run else Status.SUCCESS)
        else:
            self.remove(key, self.orch.refs[key], "")
            if not self.dry_run and key not in self.orch.failed:
                del self.orch.applied[key]
                del self.orch.refs[key]

    def remove(self, key: str, ref: Ref, detail: str) -> None:
        status = None if self.dry_run else self.sai.remove(ref)
        self.note("remove", key, detail, status)


def _entry_key(sai: SaiSwitch, entry: Entry) -> RouteKey | MySidKey | None:
    if entry.kind is T.ROUTE_ENTRY:
        return RouteKey(sai.default_vr, IpPrefix.parse(entry.name))
    if entry.kind is T.MY_SID_ENTRY:
        return MySidKey(sai.default_vr, IPv6Address(entry.name))
    return None


def _parsed(record: Record, name: str, value: Any) -> Any:
    """A value as the record stores it (an address string as an address)."""
    try:
        return record.BY_NAME[name].parse(value)
    except (ValueError, TypeError):
        return value


def _same(record: Record, kind: ObjectType, attrs: dict[str, Any]) -> bool:
    status, want = build(kind, attrs)
    return status.ok and record == want


def _show(entry: Entry, name: str, value: Any) -> str:
    """A value as the document wrote it (a reference by its key, not an object id)."""
    return str(entry.attrs.get(name, value))


def _referrers_first(entries: dict[str, Entry]) -> Iterator[str]:
    """Keys ordered so that an object goes before the objects it points at."""
    graph = {key: set(e.references.values()) & set(entries) for key, e in entries.items()}
    yield from reversed(list(TopologicalSorter(graph).static_order()))
