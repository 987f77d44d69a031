"""Node kinds behind one small registry, keyed by the plan's `kind`: each kind says how its
nodes start, come back after a crash, report their state (the `inspect` columns), what they
run as an image, what they need once wired, what a failed lab keeps of them, and which table
forwards their transit (harness/nodes/base.py). A new kind is its own module plus one line
here.

Kinds today: `frr` (a router: zebra programs the kernel; its config planned, or the user's
own), `sai` (a switch: FRR -> FPM -> agent -> SAI -> kernel), `host` (a GPU host whose NICs
reach several planes: FRR plus the spraying NIC), and containerlab's `linux` and `bridge`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.nodes.base import NodeKind
from harness.nodes.frr import FrrKind
from harness.nodes.host import HostKind
from harness.nodes.linux import BridgeKind, LinuxKind
from harness.nodes.switch.kind import SaiKind
from harness.topology.schema import Kind

if TYPE_CHECKING:
    from harness.runtime.base import NodeImage
    from harness.runtime.context import LabContext
    from harness.topology.plan import NodePlan

KINDS: dict[Kind, NodeKind] = {Kind.frr: FrrKind(), Kind.sai: SaiKind(), Kind.host: HostKind(),
                               Kind.linux: LinuxKind(), Kind.bridge: BridgeKind()}


def kind_of(lab: LabContext, name: str) -> NodeKind:
    """A node's kind; a clear error for an unknown node."""
    return KINDS[lab.node(name).plan.kind]


def image_of(node: NodePlan) -> NodeImage:
    """What the runtimes ask of a node's kind when they prepare a plan."""
    return KINDS[node.kind].image(node)
