"""A SAI switch's emulated platform (OCP OSPA's areas: power, thermal, inventory, out-of-band,
firmware, diagnostics): its model, the daemon that runs it inside the node, and starting it."""

from __future__ import annotations

import json
import time
from typing import Any

from harness.agent.client import ask
from harness.errors import LabError
from harness.linux.files import replace_file
from harness.platform.daemon import DAEMON, STATE_FILE
from harness.platform.model import initial
from harness.runtime.context import LabContext
from harness.topology.plan import NodePlan

START_S = 20.0  # as the agent's: a loaded machine starts Python slowly


def start_platform(lab: LabContext, node: NodePlan) -> int:
    """Start the node's platform daemon (recorded, so destroy ends it) with the platform as
    it was: hardware state outlives a crash of the switch's software; a new node's is a newly
    racked switch's. Returns its pid once it answers."""
    directory = lab.node_dir(node.name)
    state = directory / STATE_FILE
    if not state.exists():
        replace_file(state, json.dumps(initial(lab.plan.name, node).to_dict(), indent=1))
    pid = lab.runtime.spawn(node.name, lab.runtime.python(
        "harness.platform", "--node-dir", str(directory)), directory / "platform.out",
        f"{node.name}/platform")
    deadline = time.monotonic() + START_S
    while True:
        try:
            platform_request(lab, node.name, {"cmd": "show"})
            return pid
        except LabError:
            if lab.runtime.host_pid(node.name, pid) is None or time.monotonic() > deadline:
                out = (directory / "platform.out").read_text()[-2000:]
                raise LabError(f"{node.name}: the platform daemon did not start\n{out}") from None
            time.sleep(0.05)


def platform_request(lab: LabContext, node: str, request: dict[str, Any]) -> Any:
    return ask(lab.node_dir(node), request, timeout=5, daemon=DAEMON)


def platform_alarms(lab: LabContext, node: str) -> list[str]:
    """The alarms the daemon last wrote (read from its file: no round trip for inspect)."""
    try:
        return json.loads((lab.node_dir(node) / STATE_FILE).read_text())["alarms"]
    except (OSError, ValueError, KeyError):
        return []
