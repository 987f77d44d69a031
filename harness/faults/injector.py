"""`Faults`: inject faults into one lab, remember each, undo them all (newest first).

Every fault is recorded in the lab's fault records (so `labctl fault NAME list` in another
shell sees it, and `clear` there undoes it) and, in this process, with the monotonic time it
was injected and undone, so a flow measured meanwhile can be lined up with it. Undo keeps
going past a failing step and raises at the end, so one broken undo never leaves the others
in place; a failed undo keeps its record, to be cleared again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.core.errors import LabError
from harness.faults import records
from harness.faults.catalog import Catalog, catalog
from harness.faults.records import Record, Undo
from harness.faults.restore import restore

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
    """Every fault of the catalog is a method: `faults.plane_down(3)` injects it and
    `faults.plane_up(3)` (its `undone_by`) undoes the matching one."""

    def __init__(self, lab: LabContext, faults: Catalog | None = None) -> None:
        self.lab = lab
        self.catalog = faults or catalog()
        self.history: list[Fault] = []

    @classmethod
    def in_place(cls, lab: LabContext, faults: Catalog | None = None) -> Faults:
        """Every fault the lab has now, whoever injected it (another shell, a test)."""
        injected = cls(lab, faults)
        injected.history = [Fault(record) for record in records.load_all(lab.dir)]
        return injected

    @property
    def active(self) -> list[Fault]:
        return [f for f in self.history if f.undone_ns is None]

    def _inject(self, kind: str, target: str, do: Inject) -> Fault:
        record = Record(id=records.claim_id(self.lab.dir), kind=kind, target=target,
                        injected_at=time.time())
        injected = time.monotonic_ns()
        try:
            do(record.id, record.undo)
        except BaseException:  # Ctrl-C too: never half a fault left behind
            try:
                restore(self.lab, record, self.catalog)
            finally:
                records.remove(self.lab.dir, record.id)
            raise
        fault = Fault(record, injected, applied_ns=time.monotonic_ns())
        records.save(self.lab.dir, record)
        self.history.append(fault)
        return fault

    def undo(self, fault: Fault) -> None:
        if fault.undone_ns is not None:
            return
        fault.undone_ns = time.monotonic_ns()
        restore(self.lab, fault.record, self.catalog)
        records.remove(self.lab.dir, fault.id)

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

    def inject(self, kind: str, *args: Any, **params: Any) -> Fault:
        """Inject the catalog's fault `kind` with its arguments."""
        fault = self.catalog.kinds[kind]
        return self._inject(kind, fault.target(self.lab, *args, **params),
                            lambda fault_id, undo: fault.inject(self.lab, fault_id, undo,
                                                                *args, **params))

    def __getattr__(self, method: str) -> Callable[..., Fault]:
        """The catalog's faults as methods, and the methods that undo them by name."""
        if method.startswith("_"):
            raise AttributeError(method)
        if method in self.catalog.kinds:
            return lambda *args, **params: self.inject(method, *args, **params)
        undone = self.catalog.undoing(method)
        if undone is None:
            raise AttributeError(f"no fault {method!r}; faults: "
                                 f"{', '.join(sorted(self.catalog.kinds))}")
        return lambda *args, **params: self._undo_matching(
            undone.name, undone.target(self.lab, *args, **params))
