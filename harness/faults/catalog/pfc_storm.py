"""A PFC storm: a host NIC that pauses its switch port without end, as a NIC whose receive
path is stuck does (what switches' PFC watchdogs are for). The switch's port stops the
lossless class towards it; with `qos.watchdog` the switch finds the storm after its detection
time, drains the queue, counts it and logs the event, and takes the port back once PAUSE has
stopped for its restoration time. Only on labs with a `qos:` buffer (harness/nodes/port)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from harness.core.errors import LabError
from harness.faults.injector import FaultKind, Verb, link_argument
from harness.faults.targets import LinkRef, resolve_link
from harness.nodes.port import nic
from harness.topology.plan import Endpoint

if TYPE_CHECKING:
    from harness.faults.injector import Fault, Faults
    from harness.faults.records import Undo
    from harness.runtime.context import LabContext


def _storming(lab: LabContext, link: LinkRef) -> list[str]:
    """The NIC ends of `link`, each one a host port with a NIC engine."""
    nics = {str(end) for end in nic.nic_ends(lab.plan)}
    ends = [str(end) for end in resolve_link(lab.plan, link)[1] if str(end) in nics]
    if not ends:
        raise LabError(f"{link}: no host NIC there to storm from (a PFC storm comes from a "
                       "host port cabled to a switch, on a lab whose qos: has a buffer)")
    return ends


def _storm(lab: LabContext, ends: list[str], priorities: int) -> None:
    for end in ends:
        node, _, iface = end.partition(":")
        nic.engine_of(lab.dir, Endpoint(node=node, iface=iface)).command(
            f"storm 0 {priorities}")


def inject(lab: LabContext, fault_id: int, undo: Undo, link: LinkRef,
           priority: int = 3) -> None:
    ends = _storming(lab, link)
    undo.own["ends"] = ends
    _storm(lab, ends, 1 << priority)


def restore(lab: LabContext, fault_id: int, own: dict[str, Any]) -> None:
    _storm(lab, own["ends"], 0)


def storm_arguments(parser: argparse.ArgumentParser) -> None:
    link_argument(parser)
    parser.add_argument("--priority", type=int, default=3, choices=range(8),
                        help="the class it pauses (default 3, the lossless one)")


def pfc_storm(faults: Faults, args: argparse.Namespace) -> Fault:
    return faults.pfc_storm(args.link, args.priority)


FAULTS = (FaultKind("pfc_storm", inject, lambda lab, link, priority=3: (
    f"{','.join(_storming(lab, link))}, priority {priority}"), restore=restore),)
VERBS = (Verb("pfc-storm", "a host NIC sends PAUSE without end (the PFC watchdog's case)",
              storm_arguments, pfc_storm),)
