"""What `labctl inspect` reports per node; later layers add fields through `STATUS_PROVIDERS`.

A provider takes (lab, node name) and returns extra fields (e.g. the SAI agent's health, a
host's active planes). `state` is `running`, `degraded` or `down`; a provider may degrade it
by returning `{"state": "degraded", ...}`.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from harness.errors import LabError
from harness.lab import Lab
from harness.nodes.frr import DAEMONS
from harness.runtime.journal import process_start_time
from harness.spray.control import spray_status

StatusProvider = Callable[[Lab, str], dict[str, Any]]
STATUS_PROVIDERS: list[StatusProvider] = [spray_status]


def _base_status(lab: Lab, name: str) -> dict[str, Any]:
    node = lab.plan.node(name)
    frr = lab.frr(name)
    dead = [d for d in DAEMONS if (pid := frr.daemon_pid(d)) is None
            or process_start_time(pid) is None]
    planned = {s.peer_ip for s in lab.plan.sessions_of(name)}
    try:
        states = frr.bgp_peer_states() if "bgpd" not in dead else {}
    except LabError:
        states = {}
    up = sum(1 for peer in planned if states.get(peer) == "Established")
    state = "down" if "zebra" in dead or "bgpd" in dead else "degraded" if dead else "running"
    return {"node": name, "role": node.role.value, "kind": node.kind.value,
            "plane": node.plane, "asn": node.asn, "loopback4": node.loopback4,
            "loopback6": node.loopback6, "bgp_up": up, "bgp_total": len(planned),
            "daemons_down": dead, "state": state}


def node_status(lab: Lab, name: str) -> dict[str, Any]:
    status = _base_status(lab, name)
    for provider in STATUS_PROVIDERS:
        extra = provider(lab, name)
        if extra.get("state") == "degraded" and status["state"] == "running":
            status["state"] = "degraded"
        status.update({k: v for k, v in extra.items() if k != "state"})
    return status


def lab_status(lab: Lab) -> list[dict[str, Any]]:
    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(lambda n: node_status(lab, n), lab.nodes))
