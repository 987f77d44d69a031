"""The faults a lab can be given, one module each in this folder, found by walking it: a new
fault is one new file here, with nothing to register elsewhere.

A module says, in `FAULTS`, what its fault does (each step noted in the record's `Undo`
before it is taken, so a fault failing half-way is undone as far as it got), what it is
called in lists, and which method undoes it by name; in `VERBS`, how `labctl fault` offers
it. `Faults` (harness/faults/injector.py) and the CLI read nothing else.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.faults.injector import Fault, Faults
    from harness.runtime.context import LabContext


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
    """The shipped faults: this package's modules."""
    return load(sys.modules[__name__])


def link_argument(parser: argparse.ArgumentParser, *, optional: bool = False) -> None:
    """A link as people say it, for the verbs that take one."""
    parser.add_argument("link", nargs="?" if optional else None,
                        help="one end 'node:iface' or a link 'nodeA--nodeB'")
