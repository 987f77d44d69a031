"""What every layer after the plan works on: the resolved plan, the runtime and the journal.

Convergence, impairments, spraying, faults, traffic and the node kinds take a `LabContext`
rather than the whole `Lab`, so none of them depends on how a lab is deployed or destroyed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import LabError
from harness.nodes.frr import Frr, patience
from harness.nodes.kind import NodeKind, resolve_kinds
from harness.nodes.node import Node
from harness.paths import bfd_socket_dir, frr_pathspace
from harness.runtime.base import Runtime
from harness.runtime.journal import Journal
from harness.topology.plan import LabPlan


@dataclass
class LabContext:
    plan: LabPlan
    dir: Path
    runtime: Runtime
    journal: Journal
    _nodes: dict[str, Node] = field(default_factory=dict, repr=False)
    _kinds: dict[str, NodeKind] = field(default_factory=dict, repr=False)

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

    def frr(self, name: str) -> Frr:
        node = self.node(name)
        offload = bool(self.plan.bfd and self.plan.bfd.offload and not node.plan.user_configured)
        return Frr(node, self.node_dir(name), frr_pathspace(self.plan.name, name),
                   bfd_dir=bfd_socket_dir(self.plan.name, name) if offload else None,
                   patience=patience(len(self.plan.nodes)))

    def kind(self, name: str) -> NodeKind:
        """The node's kind, resolved once per context (see harness/nodes/kind.py)."""
        if not self._kinds:
            self._kinds.update(resolve_kinds(self.plan))
        self.node(name)  # a clear error for an unknown node
        return self._kinds[name]
