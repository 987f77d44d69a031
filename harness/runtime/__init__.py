"""Runtimes create the nodes of a lab; every runtime gives each node a network namespace.

A lab records the runtime it was deployed with (in its plan and, first of all, its journal),
and every later command reopens it with that one.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from harness.core.errors import LabError

if TYPE_CHECKING:
    from harness.linux.journal import Journal
    from harness.runtime.base import Runtime

# name -> "module:class"; imported on use, so the netns default needs no container tooling.
RUNTIMES = {"netns": "harness.runtime.netns:NetnsRuntime",
            "docker": "harness.runtime.docker:DockerRuntime",
            "mininet": "harness.runtime.mininet:MininetRuntime"}


def runtime_class(name: str) -> type[Runtime]:
    try:
        module, _, cls = RUNTIMES[name].partition(":")
    except KeyError:
        raise LabError(f"unknown runtime {name!r}; runtimes: {', '.join(RUNTIMES)}") from None
    return getattr(import_module(module), cls)


def open_runtime(name: str, lab: str, journal: Journal) -> Runtime:
    return runtime_class(name)(lab, journal)  # type: ignore[call-arg]


def all_runtimes(lab: str, journal: Journal) -> list[Runtime]:
    return [open_runtime(name, lab, journal) for name in RUNTIMES]


def labs_with_nodes() -> set[str]:
    """Labs that own a node on any runtime, journal or not (for `destroy --all`)."""
    return {lab for name in RUNTIMES for lab in runtime_class(name).all_lab_names()}
