"""`Faults`: inject faults into one lab, remember each, undo them all (newest first); and the
catalog's shape, which every fault of harness/faults/catalog/ fills in.

Every fault is recorded in the lab's fault records (so `labctl fault NAME list` in another
shell sees it, and `clear` there undoes it) and, in this process, with the monotonic time it
was injected and undone, so a flow measured meanwhile can be lined up with it. Undo keeps
going past a failing step and raises at the end, so one broken undo never leaves the others
in place; a failed undo keeps its record, to be cleared again. Restoring takes the same
steps whichever process injected the fault; each step is safe to repeat, so a `clear` that
failed half-way can simply be run again.

The faults are one module each in harness/faults/catalog/, found by walking that folder: a
new fault is one new file there. A module says, in `FAULTS`, what its fault does (each step
noted in the record's `Undo` before it is taken, so a fault failing half-way is undone as
far as it got), what it is called in lists, and which method undoes it by name; in `VERBS`,
how `labctl fault` offers it.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

from harness.core.errors import LabError
from harness.core.events import say_at
from harness.faults import filters, records, steps
from harness.faults.records import Record, Undo
from harness.links import impair

if TYPE_CHECKING:
    from harness.runtime.context import LabContext

CATALOG = "harness.faults.catalog"


@dataclass(frozen=True)
class FaultKind:
    """One fault. `inject(lab, fault_id, undo, *args)` does it; `target(lab, *args)` names
    what it hit (the record's target, and how `undone_by` finds it again); `restore`, for a
    fault with a step of its own, undoes what it kept in `undo.own`."""

    name: str  # the record's kind, and the `Faults` method that injects it
    inject: Callable[..., None]
    target: Callable[..., str]
    undone_by: str | None = None  # the `Faults` method that undoes the matching fault
    restore: Callable[[LabContext, int, dict[str, Any]], None] | None = None


@dataclass(frozen=True)
class Verb:
    """`labctl fault LAB NAME ...`: its arguments, and what it asks of `Faults`."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    call: Callable[[Faults, argparse.Namespace], Fault]
    undoes: bool = False  # it undoes a fault: `labctl` then waits for convergence
    again: Callable[[argparse.Namespace], str] | None = None  # how to undo it, as typed
    # after the injection: finish the fault at once (bgp-reset waits for its sessions) and
    # say so, or None to leave it in place
    finish: Callable[[Faults, Fault, argparse.Namespace], str | None] | None = None


@dataclass(frozen=True)
class Catalog:
    kinds: dict[str, FaultKind]
    verbs: dict[str, Verb]

    def undoing(self, method: str) -> FaultKind | None:
        """The fault whose `undone_by` is `method`."""
        return next((k for k in self.kinds.values() if k.undone_by == method), None)


def load(package: ModuleType) -> Catalog:
    """Every fault and verb of the modules in `package`."""
    kinds: dict[str, FaultKind] = {}
    verbs: dict[str, Verb] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for kind in getattr(module, "FAULTS", ()):
            if kind.name in kinds:
                raise ValueError(f"fault {kind.name!r} is defined twice ({module.__name__})")
            kinds[kind.name] = kind
        for verb in getattr(module, "VERBS", ()):
            if verb.name in verbs:
                raise ValueError(f"verb {verb.name!r} is defined twice ({module.__name__})")
            verbs[verb.name] = verb
    return Catalog(kinds, verbs)


@cache
def catalog() -> Catalog:
    """The shipped faults: the modules of harness/faults/catalog/."""
    return load(importlib.import_module(CATALOG))


def link_argument(parser: argparse.ArgumentParser, *, optional: bool = False) -> None:
    """A link as people say it, for the verbs that take one."""
    parser.add_argument("link", nargs="?" if optional else None,
                        help="one end 'node:iface' or a link 'nodeA--nodeB'")


def restore(lab: LabContext, record: Record, catalog: Catalog) -> None:
    undo = record.undo
    kind = catalog.kinds.get(record.kind)
    if kind is not None and kind.restore is not None and undo.own:
        kind.restore(lab, record.id, undo.own)
    for end in undo.ends_down:
        steps.set_state(lab, end, "up")
    for end in undo.impaired:
        impair.clear(lab, end)
    for node in undo.filters:  # before a restart: a crashed switch forwards again first
        filters.remove(lab, node, record.id)
    if undo.restart:
        steps.restart(lab, undo.restart)
    for node, peers in undo.sessions.items():
        steps.wait_established(lab, node, peers)


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
        say_at(self.lab.dir, record.injected_at, "fault", "applied", id=record.id,
               fault=str(record), in_place_ms=round((fault.applied_ns - injected) / 1e6, 3))
        return fault

    def undo(self, fault: Fault) -> None:
        if fault.undone_ns is not None:
            return
        fault.undone_ns, began = time.monotonic_ns(), time.time()
        restore(self.lab, fault.record, self.catalog)
        records.remove(self.lab.dir, fault.id)
        say_at(self.lab.dir, began, "fault", "undone", id=fault.id, fault=str(fault),
               took_ms=round((time.monotonic_ns() - fault.undone_ns) / 1e6, 3))

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
