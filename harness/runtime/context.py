"""What every layer after the runtime works on: the resolved plan, the runtime and the journal.

Node kinds, convergence, impairments, spraying, faults and traffic take a `LabContext`
rather than the whole `Lab`, so none of them depends on how a lab is deployed or destroyed.
It sits below the node kinds: what a kind adds to a node (its FRR, its kind) comes from the
node layer's own functions (`nodes.frr.frr_of`, `nodes.kind.kind_of`), never from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import LabError
from harness.linux.journal import Journal
from harness.runtime.base import Runtime
from harness.runtime.node import Node
from harness.topology.plan import LabPlan


@dataclass
class LabContext:
    plan: LabPlan
    dir: Path
    runtime: Runtime
    journal: Journal
    _nodes: dict[str, Node] = field(default_factory=dict, repr=False)

    def node(self, name: str) -> Node:
        if name not in self._nodes:
            try:
                self._nodes[name] = Node(self.plan.node(name), self.runtime)
            except KeyError:
                raise LabError(f"lab {self.plan.name} has no node {name!r}; nodes: "
                               f"{', '.join(n.name for n in self.plan.nodes)}") from None
        return self._nodes[name]

    @property
    def node_names(self) -> list[str]:
        return [n.name for n in self.plan.nodes]

    def node_dir(self, name: str) -> Path:
        return self.dir / "nodes" / name
