"""A partition: nodes of one group and nodes of another exchange no packets (dropped at
both ends), every link up."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import TYPE_CHECKING

from harness.core.errors import LabError
from harness.faults import filters
from harness.faults.injector import FaultKind, Verb
from harness.faults.targets import node_addresses, select_nodes

if TYPE_CHECKING:
    from harness.faults.records import Undo
    from harness.runtime.context import LabContext

Group = str | Iterable[str]


def group(nodes: Group) -> list[str]:
    """One node name or several, as a list."""
    return [nodes] if isinstance(nodes, str) else list(nodes)


def inject(lab: LabContext, fault_id: int, undo: Undo, a: Group, b: Group) -> None:
    side_a, side_b = group(a), group(b)
    if set(side_a) & set(side_b):
        raise LabError(f"partition sides overlap: {sorted(set(side_a) & set(side_b))}")
    for mine, theirs in ((side_a, side_b), (side_b, side_a)):
        v4 = [addr for n in theirs for addr in node_addresses(lab.plan, n)[0]]
        v6 = [addr for n in theirs for addr in node_addresses(lab.plan, n)[1]]
        for node in mine:
            undo.filters.append(node)
            filters.drop_peers(lab, node, fault_id, v4, v6)


def target(lab: LabContext, a: Group, b: Group) -> str:
    return f"{'+'.join(group(a))}|{'+'.join(group(b))}"


def sides(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", help="names or patterns, e.g. 'r1-*,bag1'")
    parser.add_argument("b", help="the other side, the same way")


FAULTS = (FaultKind("partition", inject, target),)
VERBS = (Verb("partition", "nodes of A and of B exchange nothing", sides,
              lambda faults, args: faults.partition(select_nodes(faults.lab.plan, args.a),
                                                    select_nodes(faults.lab.plan, args.b))),)
