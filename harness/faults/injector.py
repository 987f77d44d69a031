"""`Faults`: inject faults into one lab, remember each, undo them all (newest first).

Every fault is recorded in the lab's fault registry (so `labctl fault NAME list` in another
shell sees it, and `clear` there undoes it) and, in this process, with the monotonic time it
was injected and undone, so a flow measured meanwhile can be lined up with it. Undo keeps
going past a failing step and raises at the end, so one broken undo never leaves the others
in place; a failed undo keeps its record, to be cleared again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.core.errors import LabError
from harness.faults import isolation, links, nodes, registry
from harness.faults.registry import Record, Undo
from harness.faults.restore import restore
from harness.faults.targets import LinkRef, resolve_link
from harness.topology.plan import Impairment

if TYPE_CHECKING:
    from harness.runtime.context import LabContext

Inject = Callable[[int, Undo], None]  # does the fault with this id, noting each step in Undo


@dataclass
class Fault:
    record: Record
    injected_ns: int = 0  # when injecting began (this process's monotonic clock)
    applied_ns: int = 0  # when every part of it was in place (a plane is several switches)
    undone_ns: int | None = None

    @property
    def id(self) -> int:
        return self.record.id

    @property
    def kind(self) -> str:
        return self.record.kind

    @property
    def target(self) -> str:
        return self.record.target

    def __str__(self) -> str:
        return str(self.record)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "fault": str(self), "kind": self.kind, "target": self.target,
                "injected_at": self.record.injected_at, "injected_ns": self.injected_ns,
                "applied_ns": self.applied_ns, "undone_ns": self.undone_ns}


class Faults:
    def __init__(self, lab: LabContext) -> None:
        self.lab = lab
        self.history: list[Fault] = []

    @classmethod
    def in_place(cls, lab: LabContext) -> Faults:
        """Every fault the lab has now, whoever injected it (another shell, a test)."""
        faults = cls(lab)
        faults.history = [Fault(record) for record in registry.load_all(lab.dir)]
        return faults

    @property
    def active(self) -> list[Fault]:
        return [f for f in self.history if f.undone_ns is None]

    def _inject(self, kind: str, target: str, do: Inject) -> Fault:
        record = Record(id=registry.claim_id(self.lab.dir), kind=kind, target=target,
                        injected_at=time.time())
        injected = time.monotonic_ns()
        try:
            do(record.id, record.undo)
        except BaseException:  # Ctrl-C too: never half a fault left behind
            try:
                restore(self.lab, record.id, record.undo)
            finally:
                registry.remove(self.lab.dir, record.id)
            raise
        fault = Fault(record, injected, applied_ns=time.monotonic_ns())
        registry.save(self.lab.dir, record)
        self.history.append(fault)
        return fault

    def undo(self, fault: Fault) -> None:
        if fault.undone_ns is not None:
            return
        fault.undone_ns = time.monotonic_ns()
        restore(self.lab, fault.id, fault.record.undo)
        registry.remove(self.lab.dir, fault.id)

    def _undo_matching(self, kind: str, target: str) -> Fault:
        for fault in reversed(self.active):
            if fault.kind == kind and fault.target == target:
                self.undo(fault)
                return fault
        raise LabError(f"no active {kind}({target}) to undo; active: "
                       f"{', '.join(map(str, self.active)) or 'none'}")

    def undo_all(self) -> None:
        errors = []
        for fault in reversed(self.active):
            try:
                self.undo(fault)
            except Exception as exc:  # every other fault must still be undone
                errors.append(f"{fault}: {exc}")
        if errors:
            raise LabError("could not undo every fault:\n  " + "\n  ".join(errors))

    # -- the faults ---------------------------------------------------------------------------

    def link_down(self, link: LinkRef) -> Fault:
        plan = resolve_link(self.lab.plan, link)[0]
        return self._inject("link_down", plan.name,
                            lambda _, undo: links.link_down(self.lab, plan, undo))

    def link_up(self, link: LinkRef) -> Fault:
        return self._undo_matching("link_down", resolve_link(self.lab.plan, link)[0].name)

    def node_crash(self, node: str, *, forwarding: bool = False) -> Fault:
        return self._inject("node_crash", node, lambda fid, undo: nodes.node_crash(
            self.lab, node, fid, undo, forwarding=forwarding))

    def node_restart(self, node: str) -> Fault:
        return self._undo_matching("node_crash", node)

    def plane_down(self, plane: int) -> Fault:
        return self._inject("plane_down", str(plane),
                            lambda fid, undo: isolation.plane_down(self.lab, plane, fid, undo))

    def plane_up(self, plane: int) -> Fault:
        return self._undo_matching("plane_down", str(plane))

    def plane_loss(self, plane: int, loss_pct: float) -> Fault:
        """A gray failure: plane `plane` loses `loss_pct` of its packets; undo with undo()."""
        return self._inject("plane_loss", f"{plane}, {loss_pct:g}%", lambda fid, undo:
                            isolation.plane_loss(self.lab, plane, loss_pct, fid, undo))

    def link_loss(self, link: LinkRef, loss_pct: float) -> Fault:
        """A gray link: the named end(s) drop `loss_pct` of what they receive, link up."""
        _, ends = resolve_link(self.lab.plan, link)
        return self._inject("link_loss", f"{','.join(map(str, ends))}, {loss_pct:g}%",
                            lambda fid, undo: isolation.link_loss(self.lab, link, loss_pct,
                                                                  fid, undo))

    def bgp_reset(self, node: str, peer: str | None = None) -> Fault:
        """Undoing it waits until the sessions are Established again."""
        target = f"{node}->{peer}" if peer else node
        return self._inject("bgp_reset", target,
                            lambda _, undo: nodes.bgp_reset(self.lab, node, peer, undo))

    def impair(self, link: LinkRef, impairment: Impairment | None = None,
               **values: Any) -> Fault:
        """impair('leaf1:eth1', delay_us=500, loss_pct=1) or with an Impairment."""
        wanted = impairment or Impairment(**values)
        _, ends = resolve_link(self.lab.plan, link)
        return self._inject("impair", ",".join(map(str, ends)),
                            lambda _, undo: links.impair(self.lab, link, wanted, undo))

    def partition(self, a: str | Iterable[str], b: str | Iterable[str]) -> Fault:
        side_a, side_b = isolation.group(a), isolation.group(b)
        target = f"{'+'.join(side_a)}|{'+'.join(side_b)}"
        return self._inject("partition", target, lambda fid, undo: isolation.partition(
            self.lab, side_a, side_b, fid, undo))
