"""containerlab's `kind: linux` (an image other than FRR's) and `kind: bridge`: nodes that run
only what the user gives them, their `exec` commands and, if set, `cmd` for the node's life.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.nodes.frr import RT_TABLE_MAIN
from harness.topology.plan import NodePlan

if TYPE_CHECKING:
    from harness.runtime.context import LabContext


class LinuxKind:
    name = "linux"
    fib_table = RT_TABLE_MAIN

    def start(self, lab: LabContext, node: NodePlan) -> None:
        if node.cmd:
            self._spawn(lab, node)

    def restart(self, lab: LabContext, node: NodePlan) -> None:
        self.start(lab, node)

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
    """Its bridge is made while wiring (harness/links/bridge.py); nothing runs in it."""

    name = "bridge"
