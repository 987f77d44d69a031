"""A node crash: every process of the node dies (FRR, agents, applications); `node_restart`
brings back what its kind runs."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from harness.faults import filters
from harness.faults.injector import FaultKind, Verb
from harness.linux.processes import kill_and_reap
from harness.nodes.kind import kind_of

if TYPE_CHECKING:
    from harness.faults.records import Undo
    from harness.runtime.context import LabContext


def inject(lab: LabContext, fault_id: int, undo: Undo, node: str, *,
           forwarding: bool = False) -> None:
    """SIGKILL every process in the node. A crashed switch also stops forwarding, so its
    dataplane is blackholed too, unless `forwarding` keeps the stale kernel FIB working (a
    control-plane-only crash, which neighbours notice only by BFD)."""
    kind_of(lab, node)  # a clear error for an unknown node
    if not forwarding:  # first: the dataplane must not outlive the daemons by a kill's time
        undo.filters.append(node)
        filters.blackhole(lab, node, fault_id)
    undo.restart = node
    kill_and_reap(lab.runtime.node_processes(node))


def target(lab: LabContext, node: str, *, forwarding: bool = False) -> str:
    return node


def crash_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("node", help="the node")
    parser.add_argument("--forwarding", action="store_true",
                        help="a control-plane crash: the kernel FIB keeps forwarding")


FAULTS = (FaultKind("node_crash", inject, target, undone_by="node_restart"),)
VERBS = (
    Verb("node-crash", "kill every process of a node", crash_arguments,
         lambda faults, args: faults.node_crash(args.node, forwarding=args.forwarding),
         again=lambda a: f"node-restart {a.node}"),
    Verb("node-restart", "restart a crashed node",
         lambda parser: parser.add_argument("node", help="the node"),
         lambda faults, args: faults.node_restart(args.node), undoes=True),
)
