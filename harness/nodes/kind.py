"""Node kinds behind one small registry: each kind says how its nodes start, come back after
a crash, report their state (the `inspect` columns) and which table forwards their transit.

Kinds today: `frr` (a router: zebra programs the kernel; its config planned, or the user's
own), `sai` (a switch: FRR -> FPM -> agent -> SAI -> kernel), `host` (a GPU host whose NICs
reach several planes: FRR plus the spraying NIC), and containerlab's `linux` and `bridge`.
A host cabled to one plane has nothing to spray over and is a plain `frr` node.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from harness.nodes.frr import FrrKind
from harness.nodes.host import HostKind
from harness.nodes.linux import BridgeKind, LinuxKind
from harness.nodes.switch.kind import SaiKind
from harness.spray.control import sprays
from harness.topology.plan import NodePlan
from harness.topology.schema import Kind

if TYPE_CHECKING:
    from harness.runtime.context import LabContext


class NodeKind(Protocol):
    name: str
    fib_table: int  # the kernel table that forwards transit packets on this kind

    def start(self, lab: LabContext, node: NodePlan) -> None:
        """Bring the node's processes up on a freshly wired node."""

    def restart(self, lab: LabContext, node: NodePlan) -> None:
        """Bring them back after every process of the node died (a crash); the node's
        kernel state (links, addresses, rules, FIB) is still there."""

    def status(self, lab: LabContext, node: NodePlan) -> dict[str, Any]:
        """`inspect` columns; a `state` of `degraded` or `down` lowers the node's state."""


HOST: NodeKind = HostKind()
KINDS: dict[Kind, NodeKind] = {Kind.frr: FrrKind(), Kind.sai: SaiKind(), Kind.linux: LinuxKind(),
                               Kind.bridge: BridgeKind()}


def kind_of(lab: LabContext, name: str) -> NodeKind:
    """A node's kind (a host's depends on its cabling); a clear error for an unknown node."""
    node = lab.node(name).plan
    return HOST if sprays(lab.plan, node) else KINDS[node.kind]
