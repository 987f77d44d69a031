"""A BGP reset: a node's sessions (all, or those to one peer) hard-reset; undoing it waits
until they are Established again, so the next fault starts from a converged lab."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from harness.core.errors import LabError
from harness.faults.injector import FaultKind, Verb
from harness.nodes.frr import frr_of

if TYPE_CHECKING:
    from harness.faults.injector import Fault, Faults
    from harness.faults.records import Undo
    from harness.runtime.context import LabContext


def inject(lab: LabContext, fault_id: int, undo: Undo, node: str,
           peer: str | None = None) -> None:
    sessions = [s for s in lab.plan.sessions_of(node) if peer is None or s.peer == peer]
    if not sessions:
        raise LabError(f"{node} has no BGP session{f' to {peer}' if peer else ''}")
    undo.sessions[node] = [s.peer_ip for s in sessions]
    frr_of(lab, node).vtysh(*(f"clear bgp {s.peer_ip}" for s in sessions))


def target(lab: LabContext, node: str, peer: str | None = None) -> str:
    return f"{node}->{peer}" if peer else node


def reset_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("node", help="the node")
    parser.add_argument("--peer", help="only the sessions to this node")
    parser.add_argument("--no-wait", action="store_true",
                        help="return at once (the fault stays listed until `clear`)")


def wait_for_sessions(faults: Faults, fault: Fault, args: argparse.Namespace) -> str | None:
    """Unless told not to, undo it at once: wait until the sessions are back."""
    if args.no_wait:
        return None
    started = time.monotonic()
    faults.undo(fault)
    return f"{fault}: sessions Established again {time.monotonic() - started:.1f} s after " \
        "the reset"


FAULTS = (FaultKind("bgp_reset", inject, target),)
VERBS = (Verb("bgp-reset", "hard-reset a node's BGP sessions", reset_arguments,
              lambda faults, args: faults.bgp_reset(args.node, args.peer),
              finish=wait_for_sessions),)
