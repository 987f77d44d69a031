"""The platform daemon from the lab's side: a newly racked switch's state, starting the daemon
in the node, asking it, and reading the alarms it last wrote."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from harness.linux.files import replace_file
from harness.nodes.switch.agent.client import ask
from harness.nodes.switch.platform.daemon import DAEMON, LOG_FILE, STATE_FILE
from harness.nodes.switch.platform.model import FANS, INLET_C, PSUS, Fan, PlatformState, Psu, Sensor
from harness.runtime.context import LabContext
from harness.topology.plan import NodePlan
from harness.topology.platforms import PLATFORMS, Platform

START_S = 20.0  # as the agent's: a loaded machine starts Python slowly


def start_platform(lab: LabContext, node: NodePlan) -> int:
    """Start the node's platform daemon (recorded, so destroy ends it) with the platform as
    it was: hardware state outlives a crash of the switch's software; a new node's is a newly
    racked switch's. Returns its pid once it answers."""
    directory = lab.node_dir(node.name)
    state = directory / STATE_FILE
    if not state.exists():
        replace_file(state, json.dumps(initial(lab.plan.name, node).to_dict(), indent=1))
    pid, _ = lab.start_helper(
        node.name, lab.runtime.python("harness.nodes.switch.platform", "--node-dir",
        str(directory), "--lab-dir", str(lab.dir)), "platform daemon",
        directory / "platform.out", directory / LOG_FILE,
        lambda: platform_request(lab, node.name, {"cmd": "show"}), START_S)
    return pid


def platform_request(lab: LabContext, node: str, request: dict[str, Any]) -> Any:
    return ask(lab.node_dir(node), request, timeout=5, daemon=DAEMON)


def platform_alarms(lab: LabContext, node: str) -> list[str]:
    """The alarms the daemon last wrote (read from its file: no round trip for inspect)."""
    try:
        return json.loads((lab.node_dir(node) / STATE_FILE).read_text())["alarms"]
    except (OSError, ValueError, KeyError):
        return []


def _serial(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:10].upper()


def optic(speed_mbps: int) -> str:
    return {800_000: "OSFP 2x400G-DR4", 400_000: "QSFP-DD 400G-DR4",
            100_000: "QSFP28 100G-CWDM4"}.get(speed_mbps, f"{speed_mbps // 1000}G module")


def initial(lab: str, node: NodePlan) -> PlatformState:
    """A newly racked switch of the node's platform: serials from the lab and node names (the
    same on every deploy), an optic in each cabled port."""
    platform: Platform = PLATFORMS[node.platform or "linux"]
    speed = platform.port_speed_mbps
    optics = {i.name: {"type": optic((i.bandwidth_bps or speed * 1_000_000) // 1_000_000),
                       "vendor": "FL-OPTICS", "serial": _serial(lab, node.name, i.name)}
              for i in node.interfaces}
    sensors = [Sensor("inlet", INLET_C, 45.0, 55.0), Sensor("asic", 60.0, 95.0, 105.0),
               Sensor("outlet", 40.0, 70.0, 80.0)]
    state = PlatformState(node=node.name, platform=platform.name,
                          serial=_serial(lab, node.name), asic=platform.asic, optics=optics,
                          sensors=sensors, fans=[Fan(f"fan{i + 1}") for i in range(FANS)],
                          psus=[Psu(f"psu{i + 1}") for i in range(PSUS)])
    state.step()
    return state
