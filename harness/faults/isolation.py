"""Faults that silence part of the fabric while every link stays up: a whole plane, a share of
a plane's packets (a gray failure), or the traffic between two groups of nodes. Only BFD, BGP
timers and the hosts' data-plane probes can find them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from harness.errors import LabError
from harness.faults import filters
from harness.faults.targets import node_addresses
from harness.topology.schema import Role

if TYPE_CHECKING:
    from harness.runtime.context import LabContext

Undo = Callable[[], None]


def plane_switches(lab: LabContext, plane: int) -> list[str]:
    switches = [n.name for n in lab.plan.nodes if n.plane == plane]
    if not switches:
        planes = sorted({n.plane for n in lab.plan.nodes if n.plane is not None})
        raise LabError(f"lab {lab.plan.name} has no plane {plane}; planes: {planes or 'none'}")
    return switches


def plane_down(lab: LabContext, plane: int, fault_id: int) -> Undo:
    """Every switch of the plane stops forwarding and answering (a plane-wide outage)."""
    switches = plane_switches(lab, plane)
    for switch in switches:
        filters.blackhole(lab, switch, fault_id)

    def undo() -> None:
        for switch in switches:
            filters.remove(lab, switch, fault_id)
    return undo


def plane_loss(lab: LabContext, plane: int, loss_pct: float, fault_id: int) -> Undo:
    """A gray plane: its leaves drop `loss_pct` of what hosts send into it, at random. Every
    packet sprayed into the plane passes one such drop whatever its path, so the plane loses
    `loss_pct` end to end; BFD, at three misses in a row, rarely notices."""
    if not 0 < loss_pct <= 100:
        raise LabError(f"plane loss must be above 0% and at most 100%, not {loss_pct}%")
    host_ports = {switch: [i.name for i in lab.plan.node(switch).interfaces
                           if lab.plan.node(i.peer.node).role is Role.host]
                  for switch in plane_switches(lab, plane)}
    touched = [switch for switch, ports in host_ports.items() if ports]
    for switch in touched:
        filters.drop_share(lab, switch, fault_id, host_ports[switch], loss_pct)

    def undo() -> None:
        for switch in touched:
            filters.remove(lab, switch, fault_id)
    return undo


def group(nodes: str | Iterable[str]) -> list[str]:
    """One node name or several, as a list."""
    return [nodes] if isinstance(nodes, str) else list(nodes)


def partition(lab: LabContext, a: str | Iterable[str], b: str | Iterable[str],
              fault_id: int) -> Undo:
    """Nodes of `a` and nodes of `b` no longer exchange packets (dropped at both ends)."""
    side_a, side_b = group(a), group(b)
    if set(side_a) & set(side_b):
        raise LabError(f"partition sides overlap: {sorted(set(side_a) & set(side_b))}")
    touched = []
    for mine, theirs in ((side_a, side_b), (side_b, side_a)):
        v4 = [addr for n in theirs for addr in node_addresses(lab.plan, n)[0]]
        v6 = [addr for n in theirs for addr in node_addresses(lab.plan, n)[1]]
        for node in mine:
            filters.drop_peers(lab, node, fault_id, v4, v6)
            touched.append(node)

    def undo() -> None:
        for node in touched:
            filters.remove(lab, node, fault_id)
    return undo
