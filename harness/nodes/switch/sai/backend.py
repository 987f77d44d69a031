"""What a backend (the "ASIC") provides to the switch; the kernel and the fake implement it.

The switch has already validated a call, checked references and capacity, and stored the new
record when it calls the backend; a backend only programs its hardware and reports a status.
It may read the switch's objects through `ObjectView` to resolve references (a next hop's
router interface, a group's members); the switch satisfies that protocol, so backends never
import the switch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from harness.nodes.switch.sai.records import NextHopGroupMember, Port, Record
from harness.nodes.switch.sai.status import Status
from harness.nodes.switch.sai.types import EntryKey

Ref = int | EntryKey


class ObjectView(Protocol):
    """What a backend may read of the switch's objects."""

    def record(self, ref: Ref) -> Record | None: ...

    def referrers(self, oid: int) -> set[Ref]: ...

    def members(self, group: int) -> dict[int, NextHopGroupMember]: ...


class Op(NamedTuple):
    """One change: create (old None), remove (new None) or set (both). A tuple: a FIB
    download makes one per route."""

    ref: Ref
    old: Record | None
    new: Record | None

    @property
    def api(self) -> str:
        return "create" if self.old is None else "remove" if self.new is None else "set"


@dataclass
class Discovery:
    """Objects found in the hardware on a warm start, in the backend's own terms.

    next_hops: handle -> (ip, lane); groups: handle -> [(member handle, weight)];
    routes: prefix -> ("nh", handle) | ("lane", lane) | ("drop", None);
    sid_lists: SRv6 next hop's handle -> (segments, SID list type, lane, the list's handle);
    my_sids: SID -> (behavior, (next hop ip, lane) for End.X and End.DX*, else None).
    """

    next_hops: dict[int, tuple[str, int]] = field(default_factory=dict)
    groups: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    routes: dict[str, tuple[str, int | None]] = field(default_factory=dict)
    sid_lists: dict[int, SidListFound] = field(default_factory=dict)
    my_sids: dict[str, MySidFound] = field(default_factory=dict)


class SidListFound(NamedTuple):
    segments: tuple[str, ...]
    type: str
    lane: int
    handle: int  # of the list itself where the hardware has one (the engine's index), else 0


class MySidFound(NamedTuple):
    behavior: str
    crosses_to: tuple[str, int] | None  # (next hop ip, lane)


class Backend(Protocol):
    name: str

    def bind(self, view: ObjectView) -> None:
        """Called once by the switch that owns this backend."""

    def apply(self, ops: list[Op]) -> list[Status]:
        """Program a batch of changes (SAI bulk calls arrive as one batch); one status each."""

    def port_stats(self, port: Port) -> dict[str, int]: ...

    def queue_stats(self, port: Port) -> list[dict[str, int]]: ...

    def discover(self) -> Discovery: ...

    def adopt(self, ref: Ref, handle: int) -> None:
        """Bind an adopted object to the hardware object `handle` found by discover()."""
