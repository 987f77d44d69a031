"""containerlab's `kind: linux` (an image other than FRR's) and `kind: bridge`: nodes that run
only what the user gives them, their `exec` commands and, if set, `cmd` for the node's life.

containerlab expects a bridge node's bridge to exist in the host; here it lives in the bridge
node's own namespace, so a lab never adds a bridge to the host and two labs can use the same
name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from harness.nodes.base import Evidence
from harness.nodes.frr import RT_TABLE_MAIN
from harness.runtime.base import NodeImage
from harness.runtime.images import REPOSITORY
from harness.runtime.node import Node
from harness.topology.plan import NodePlan

if TYPE_CHECKING:
    from harness.runtime.context import LabContext


BRIDGE_NAME_MAX = 15  # IFNAMSIZ - 1


def bridge_name(node: str) -> str:
    return node[:BRIDGE_NAME_MAX]


def join_bridge(node: Node) -> None:
    with node.netlink() as ip:
        name = bridge_name(node.name)
        ip.link("add", ifname=name, kind="bridge")
        bridge = ip.link_lookup(ifname=name)[0]
        for iface in node.plan.interfaces:
            port = ip.link_lookup(ifname=iface.name)[0]
            ip.link("set", index=port, master=bridge, state="up")
        ip.link("set", index=bridge, state="up")


class LinuxKind:
    name = "linux"
    fib_table = RT_TABLE_MAIN
    port_engine = False
    needs: Mapping[str, str] = {}

    def image(self, node: NodePlan) -> NodeImage:
        """The host image (its tools); a user's image runs its exec and cmd."""
        return NodeImage(f"{REPOSITORY}/host", None)

    def wire(self, lab: LabContext, node: NodePlan) -> None:
        """Nothing beyond its links and addresses."""

    def evidence(self, lab: LabContext, node: NodePlan) -> Evidence:
        """Nothing beyond the kernel's state, which every node's evidence has."""
        return {}

    def start(self, lab: LabContext, node: NodePlan) -> None:
        if node.cmd:
            self._spawn(lab, node)

    def restart(self, lab: LabContext, node: NodePlan) -> None:
        self.start(lab, node)

    def converged(self, lab: LabContext, node: NodePlan) -> None:
        """Its command started with it."""

    def _spawn(self, lab: LabContext, node: NodePlan) -> None:
        directory = lab.node_dir(node.name)
        directory.mkdir(parents=True, exist_ok=True)
        argv = lab.runtime.confine(node.name, ["sh", "-c", node.cmd or ""])
        pid = lab.runtime.spawn(node.name, argv,
                                directory / "cmd.log", f"{node.name}/cmd")
        (directory / "cmd.pid").write_text(f"{pid}\n")

    def status(self, lab: LabContext, node: NodePlan) -> dict[str, Any]:
        if not node.cmd:
            return {"daemons_down": [], "state": "running"}
        pid_file = lab.node_dir(node.name) / "cmd.pid"
        pid = int(pid_file.read_text()) if pid_file.exists() else None
        alive = pid is not None and lab.runtime.host_pid(node.name, pid) is not None
        return {"daemons_down": [] if alive else ["cmd"], "state": "running" if alive
                else "down"}


class BridgeKind(LinuxKind):
    """The links that end on it join one Linux bridge once they exist; nothing runs in it."""

    name = "bridge"

    def wire(self, lab: LabContext, node: NodePlan) -> None:
        join_bridge(lab.node(node.name))
