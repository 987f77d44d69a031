"""Gray loss: a share of the packets dropped at random while every link stays up, on a
whole plane (`plane_loss`) or on a link (`link_loss`). BFD, at three misses in a row, rarely
notices; the hosts' probes and the traffic do."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from harness.core.errors import LabError, UsageError
from harness.faults import filters
from harness.faults.injector import FaultKind, Verb, link_argument
from harness.faults.targets import LinkRef, plane_switches, resolve_link
from harness.topology.schema import Role
from harness.topology.units import parse_percent

if TYPE_CHECKING:
    from harness.faults.injector import Fault, Faults
    from harness.faults.records import Undo
    from harness.runtime.context import LabContext


def _check_loss(loss_pct: float) -> None:
    if not 0 < loss_pct <= 100:
        raise LabError(f"a gray loss must be above 0% and at most 100%, not {loss_pct}%")


def plane_loss(lab: LabContext, fault_id: int, undo: Undo, plane: int,
               loss_pct: float) -> None:
    """The plane's leaves drop `loss_pct` of what hosts send into it: every packet sprayed
    into the plane passes one such drop whatever its path, so the plane loses `loss_pct`
    end to end."""
    _check_loss(loss_pct)
    host_ports = {switch: [i.name for i in lab.plan.node(switch).interfaces
                           if lab.plan.node(i.peer.node).role is Role.host]
                  for switch in plane_switches(lab.plan, plane)}
    for switch, ports in host_ports.items():
        if ports:
            undo.filters.append(switch)
            filters.drop_share(lab, switch, fault_id, ports, loss_pct)


def link_loss(lab: LabContext, fault_id: int, undo: Undo, link: LinkRef,
              loss_pct: float) -> None:
    """Each named end drops `loss_pct` of what it receives ('a--b' loses it both ways)."""
    _check_loss(loss_pct)
    for end in resolve_link(lab.plan, link)[1]:
        undo.filters.append(end.node)
        filters.drop_share(lab, end.node, fault_id, [end.iface], loss_pct)


def _percent(text: str) -> float:
    try:
        return parse_percent(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def gray_arguments(parser: argparse.ArgumentParser) -> None:
    link_argument(parser, optional=True)
    parser.add_argument("--plane", type=int, help="every host-facing port of this plane instead")
    parser.add_argument("--loss", required=True, type=_percent, help="e.g. 2%%")


def gray_loss(faults: Faults, args: argparse.Namespace) -> Fault:
    if (args.link is None) == (args.plane is None):
        raise UsageError("gray-loss takes a LINK or --plane N (one of them)")
    if args.plane is not None:
        return faults.plane_loss(args.plane, args.loss)
    return faults.link_loss(args.link, args.loss)


FAULTS = (
    FaultKind("plane_loss", plane_loss,
              lambda lab, plane, loss_pct: f"{plane}, {loss_pct:g}%"),
    FaultKind("link_loss", link_loss, lambda lab, link, loss_pct: (
        f"{','.join(map(str, resolve_link(lab.plan, link)[1]))}, {loss_pct:g}%")),
)
VERBS = (Verb("gray-loss", "drop a share of packets silently, links up", gray_arguments,
              gray_loss),)
