"""A plane down: every switch of the plane stops forwarding and answering while every link
stays up (a plane-wide outage only BFD, BGP timers and the hosts' probes can find)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from harness.faults import filters
from harness.faults.injector import FaultKind, Verb
from harness.faults.targets import plane_switches

if TYPE_CHECKING:
    from harness.faults.records import Undo
    from harness.runtime.context import LabContext


def inject(lab: LabContext, fault_id: int, undo: Undo, plane: int) -> None:
    for switch in plane_switches(lab.plan, plane):
        undo.filters.append(switch)
        filters.blackhole(lab, switch, fault_id)


def target(lab: LabContext, plane: int) -> str:
    return str(plane)


def plane_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("plane", type=int, help="the plane number")


FAULTS = (FaultKind("plane_down", inject, target, undone_by="plane_up"),)
VERBS = (
    Verb("plane-down", "blackhole every switch of a plane (links stay up)", plane_argument,
         lambda faults, args: faults.plane_down(args.plane),
         again=lambda a: f"plane-up {a.plane}"),
    Verb("plane-up", "bring a plane back", plane_argument,
         lambda faults, args: faults.plane_up(args.plane), undoes=True),
)
