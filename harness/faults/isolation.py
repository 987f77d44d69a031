"""Faults that silence part of the fabric while every link stays up: a whole plane, or the
traffic between two groups of nodes. Only BFD and BGP timers can find them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from harness.errors import LabError
from harness.faults import filters
from harness.faults.targets import node_addresses

if TYPE_CHECKING:
    from harness.deploy.context import LabContext

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
