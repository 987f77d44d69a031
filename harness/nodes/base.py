"""What every node kind provides: the hooks deploy, the runtimes, faults and `inspect` call,
so none of them asks which kind a node is (the registry is harness/nodes/kind.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from harness.runtime.base import NodeImage
    from harness.runtime.context import LabContext
    from harness.topology.plan import NodePlan

# section -> what to read -> how: a failed lab's evidence of a node (faults/evidence.py)
Evidence = dict[str, dict[str, Callable[[], Any]]]


class NodeKind(Protocol):
    name: str
    fib_table: int  # the kernel table that forwards transit packets on this kind
    # Its ports are port engines it runs itself (fl-port, programmed by a SAI switch's agent
    # from its MMU objects); a port cabled to one gets a NIC engine (nodes/port/nic.py).
    port_engine: bool
    needs: Mapping[str, str]  # kernel features (linux/features.py) -> what the kind does with each

    def image(self, node: NodePlan) -> NodeImage:
        """The image built here it runs in a container, and what a user's image becomes."""

    def wire(self, lab: LabContext, node: NodePlan) -> None:
        """What the node needs once every link and address is in place (a bridge joins its
        ports)."""

    def start(self, lab: LabContext, node: NodePlan) -> None:
        """Bring the node's processes up on a freshly wired node."""

    def restart(self, lab: LabContext, node: NodePlan) -> None:
        """Bring them back after every process of the node died (a crash); the node's
        kernel state (links, addresses, rules, FIB) is still there."""

    def converged(self, lab: LabContext, node: NodePlan) -> None:
        """Start what would only churn while the lab's routes come in (a host's spraying
        NIC); deploy calls it once BGP has converged, or has given up waiting, and attaches
        BFD once it has returned."""

    def status(self, lab: LabContext, node: NodePlan) -> dict[str, Any]:
        """`inspect` columns; a `state` of `degraded` or `down` lowers the node's state."""

    def evidence(self, lab: LabContext, node: NodePlan) -> Evidence:
        """What to keep of the node's own state when its lab fails, beyond the kernel's."""
