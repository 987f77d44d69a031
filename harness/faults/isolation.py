"""Faults that silence part of the fabric while every link stays up: a whole plane, a share of
a plane's packets (a gray failure), or the traffic between two groups of nodes. Only BFD, BGP
timers and the hosts' data-plane probes can find them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from harness.core.errors import LabError
from harness.faults import filters
from harness.faults.registry import Undo
from harness.faults.targets import LinkRef, node_addresses, resolve_link
from harness.topology.schema import Role

if TYPE_CHECKING:
    from harness.runtime.context import LabContext


def plane_switches(lab: LabContext, plane: int) -> list[str]:
    switches = [n.name for n in lab.plan.nodes if n.plane == plane]
    if not switches:
        planes = sorted({n.plane for n in lab.plan.nodes if n.plane is not None})
        raise LabError(f"lab {lab.plan.name} has no plane {plane}; planes: {planes or 'none'}")
    return switches


def plane_down(lab: LabContext, plane: int, fault_id: int, undo: Undo) -> None:
    """Every switch of the plane stops forwarding and answering (a plane-wide outage)."""
    for switch in plane_switches(lab, plane):
        undo.filters.append(switch)
        filters.blackhole(lab, switch, fault_id)


def _check_loss(loss_pct: float) -> None:
    if not 0 < loss_pct <= 100:
        raise LabError(f"a gray loss must be above 0% and at most 100%, not {loss_pct}%")


def plane_loss(lab: LabContext, plane: int, loss_pct: float, fault_id: int,
               undo: Undo) -> None:
    """A gray plane: its leaves drop `loss_pct` of what hosts send into it, at random. Every
    packet sprayed into the plane passes one such drop whatever its path, so the plane loses
    `loss_pct` end to end; BFD, at three misses in a row, rarely notices."""
    _check_loss(loss_pct)
    host_ports = {switch: [i.name for i in lab.plan.node(switch).interfaces
                           if lab.plan.node(i.peer.node).role is Role.host]
                  for switch in plane_switches(lab, plane)}
    for switch, ports in host_ports.items():
        if ports:
            undo.filters.append(switch)
            filters.drop_share(lab, switch, fault_id, ports, loss_pct)


def link_loss(lab: LabContext, ref: LinkRef, loss_pct: float, fault_id: int,
              undo: Undo) -> None:
    """A gray link: each named end drops `loss_pct` of what it receives, at random, while the
    link stays up ('a--b' loses that share both ways)."""
    _check_loss(loss_pct)
    for end in resolve_link(lab.plan, ref)[1]:
        undo.filters.append(end.node)
        filters.drop_share(lab, end.node, fault_id, [end.iface], loss_pct)


def group(nodes: str | Iterable[str]) -> list[str]:
    """One node name or several, as a list."""
    return [nodes] if isinstance(nodes, str) else list(nodes)


def partition(lab: LabContext, a: str | Iterable[str], b: str | Iterable[str],
              fault_id: int, undo: Undo) -> None:
    """Nodes of `a` and nodes of `b` no longer exchange packets (dropped at both ends)."""
    side_a, side_b = group(a), group(b)
    if set(side_a) & set(side_b):
        raise LabError(f"partition sides overlap: {sorted(set(side_a) & set(side_b))}")
    for mine, theirs in ((side_a, side_b), (side_b, side_a)):
        v4 = [addr for n in theirs for addr in node_addresses(lab.plan, n)[0]]
        v6 = [addr for n in theirs for addr in node_addresses(lab.plan, n)[1]]
        for node in mine:
            undo.filters.append(node)
            filters.drop_peers(lab, node, fault_id, v4, v6)
