"""`Faults`: inject faults into one lab, remember each, undo them all (newest first).

Every fault is recorded with the monotonic time it was injected and undone, so a flow
measured meanwhile can be lined up with it. Undo keeps going past a failing step and raises
at the end, so one broken undo never leaves the others in place.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.errors import LabError
from harness.faults import isolation, links, nodes
from harness.faults.targets import LinkRef, resolve_link
from harness.topology.plan import Impairment

if TYPE_CHECKING:
    from harness.runtime.context import LabContext


@dataclass
class Fault:
    id: int
    kind: str
    target: str
    undo: Callable[[], None] = field(repr=False)
    injected_ns: int = 0  # when injecting began
    applied_ns: int = 0  # when every part of it was in place (a plane is several switches)
    undone_ns: int | None = None

    def __str__(self) -> str:
        return f"{self.kind}({self.target})"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "fault": str(self), "kind": self.kind, "target": self.target,
                "injected_ns": self.injected_ns, "applied_ns": self.applied_ns,
                "undone_ns": self.undone_ns}


class Faults:
    def __init__(self, lab: LabContext) -> None:
        self.lab = lab
        self.history: list[Fault] = []
        self._next_id = 1

    @property
    def active(self) -> list[Fault]:
        return [f for f in self.history if f.undone_ns is None]

    def _inject(self, kind: str, target: str, do: Callable[[int], Callable[[], None]]) -> Fault:
        fault_id, self._next_id = self._next_id, self._next_id + 1
        injected = time.monotonic_ns()
        undo = do(fault_id)
        fault = Fault(fault_id, kind, target, undo, injected, applied_ns=time.monotonic_ns())
        self.history.append(fault)
        return fault

    def undo(self, fault: Fault) -> None:
        if fault.undone_ns is not None:
            return
        fault.undone_ns = time.monotonic_ns()
        fault.undo()

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
        return self._inject("link_down", plan.name, lambda _: links.link_down(self.lab, plan))

    def link_up(self, link: LinkRef) -> Fault:
        return self._undo_matching("link_down", resolve_link(self.lab.plan, link)[0].name)

    def node_crash(self, node: str, *, forwarding: bool = False) -> Fault:
        return self._inject("node_crash", node, lambda fid: nodes.node_crash(
            self.lab, node, fid, forwarding=forwarding))

    def node_restart(self, node: str) -> Fault:
        return self._undo_matching("node_crash", node)

    def plane_down(self, plane: int) -> Fault:
        return self._inject("plane_down", str(plane),
                            lambda fid: isolation.plane_down(self.lab, plane, fid))

    def plane_up(self, plane: int) -> Fault:
        return self._undo_matching("plane_down", str(plane))

    def plane_loss(self, plane: int, loss_pct: float) -> Fault:
        """A gray failure: plane `plane` loses `loss_pct` of its packets; undo with undo()."""
        return self._inject("plane_loss", f"{plane}, {loss_pct:g}%",
                            lambda fid: isolation.plane_loss(self.lab, plane, loss_pct, fid))

    def bgp_reset(self, node: str, peer: str | None = None) -> Fault:
        target = f"{node}->{peer}" if peer else node
        return self._inject("bgp_reset", target, lambda _: nodes.bgp_reset(self.lab, node, peer))

    def impair(self, link: LinkRef, impairment: Impairment | None = None,
               **values: Any) -> Fault:
        """impair('leaf1:eth1', delay_us=500, loss_pct=1) or with an Impairment."""
        wanted = impairment or Impairment(**values)
        _, ends = resolve_link(self.lab.plan, link)
        return self._inject("impair", ",".join(map(str, ends)),
                            lambda _: links.impair(self.lab, link, wanted))

    def partition(self, a: str | Iterable[str], b: str | Iterable[str]) -> Fault:
        side_a, side_b = isolation.group(a), isolation.group(b)
        target = f"{'+'.join(side_a)}|{'+'.join(side_b)}"
        return self._inject("partition", target,
                            lambda fid: isolation.partition(self.lab, side_a, side_b, fid))
