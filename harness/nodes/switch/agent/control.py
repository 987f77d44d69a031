"""The agent's control socket: one JSON request per connection, one JSON answer.

`labctl sai` and `labctl inspect` talk to it (harness/nodes/switch/agent/client.py). Requests:
{"cmd": "status" | "dump" | "counters" | "trace" | "fault" | "apply" | "config" | "cable" |
"srv6" | "ports", ...};
`apply` makes the switch hold its configuration document (agent/config.py), `"dry_run":
true` only says what that would change; `cable` measures "ports" to the agents at their far
ends and sets their lossless headroom from it (agent/cable.py); `ports` sets every port's
admin state ({"admin": "up" | "down"}: the platform layer's thermal shutdown). The socket
lives in the node directory (`sai.sock`), so reaching it needs no namespace switch.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address
from typing import TYPE_CHECKING, Any, Protocol

from harness.nodes.switch.sai.capacity import TABLES
from harness.nodes.switch.sai.records import MySidEntry, Port, Srv6SidList
from harness.nodes.switch.sai.seg6 import UserspaceSeg6
from harness.nodes.switch.sai.status import Status
from harness.nodes.switch.sai.types import ObjectType, format_oid

T = ObjectType

if TYPE_CHECKING:
    import logging
    from pathlib import Path

    from harness.nodes.switch.agent.config import Change, ConfigOrch
    from harness.nodes.switch.agent.orch import RouteOrch
    from harness.nodes.switch.agent.te import TeOrch
    from harness.nodes.switch.sai.api import SaiSwitch
    from harness.nodes.switch.sai.capacity import CapacityProfile
    from harness.nodes.switch.sai.kernel import KernelBackend


class Agent(Protocol):
    """What the control socket reads and asks of the agent (agent/main.py's Agent): named
    here, so this module and the agent's do not import each other."""

    sai: SaiSwitch
    backend: KernelBackend
    orch: RouteOrch
    config: ConfigOrch
    te: TeOrch
    log: logging.Logger
    base_capacity: CapacityProfile
    port_names: dict[int, str]
    config_path: Path
    config_error: str | None

    def status(self) -> dict[str, Any]: ...

    def apply_config(self, dry_run: bool) -> list[Change]: ...

    def measure_cables(self, ports: list[str]) -> list[dict[str, Any]]: ...


def _plain(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value >> 48:
        return format_oid(value)
    if isinstance(value, IPv4Address | IPv6Address):
        return str(value)
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def dump(agent: Agent, kinds: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in ObjectType:
        if kinds and kind.name not in kinds:
            continue
        objects = agent.sai.objects(kind)
        if objects:
            out[str(kind)] = [{"id": format_oid(ref) if isinstance(ref, int) else str(ref),
                               **{k: _plain(v) for k, v in record.attrs().items()}}
                              for ref, record in sorted(objects.items(), key=lambda i: str(i[0]))]
    return out


def counters(agent: Agent) -> list[dict[str, Any]]:
    """Per port: its statistics and queues; on a port the port engine serves, also its
    priority groups, PFC frames per priority and the shared pool (harness/nodes/port)."""
    rows = []
    engine = agent.backend.mmu.counters()
    for oid, port in agent.sai.objects(ObjectType.PORT).items():
        assert isinstance(port, Port)
        _, stats = agent.sai.get_port_stats(oid)  # type: ignore[arg-type]
        _, queues = agent.sai.get_queue_stats(oid)  # type: ignore[arg-type]
        name = agent.port_names.get(oid, "?")
        row = {"port": format_oid(oid), "name": name, "lanes": list(port.hw_lane_list),
               "stats": stats, "queues": queues}
        if engine is not None and name in engine.names:
            served = engine.port(name)
            row["stats"] = {**stats, **served.sai()}
            row["groups"] = [{"index": i, "pausing": g.pausing, **g.stats}
                             for i, g in enumerate(served.groups)]
            row["pool"] = engine.pool
        rows.append(row)
    return rows


def fault(agent: Agent, request: dict[str, Any]) -> dict[str, Any]:
    action = request.get("action")
    if action == "fail":
        status = Status[request.get("status", "FAILURE")]
        agent.sai.faults.add(request["api"], request.get("object_type", "*"),
                             float(request["rate"]), status)
    elif action == "shrink":
        table = request["table"]
        if table not in TABLES:
            raise ValueError(f"table {table!r}: use one of {', '.join(TABLES)}")
        agent.sai.capacity = agent.sai.capacity.shrunk(TABLES[table], int(request["size"]))
    elif action == "clear":
        agent.sai.faults.clear()
        agent.sai.capacity = agent.base_capacity
    else:
        raise ValueError(f"fault action {action!r}: use fail, shrink or clear")
    agent.log.warning("fault %s: %s", action, {k: v for k, v in request.items() if k != "cmd"})
    return {"faults": agent.sai.faults.as_dict(), "capacity": agent.sai.capacity.as_dict()}


def srv6(agent: Agent) -> dict[str, Any]:
    """The switch's SRv6: its dataplane path, SIDs and SID lists (with the userspace engine's
    packet counts; the kernel's seg6 keeps none), and its TE policies' state."""
    seg6 = agent.backend.seg6
    shown = seg6.engine.show() if isinstance(seg6, UserspaceSeg6) and seg6.engine.answers() \
        else None
    sids = {str(key.sid): {"behavior": record.endpoint_behavior.rsplit("_", 1)[1],
                           **(shown.sids.get(str(key.sid), {}) if shown else {})}
            for key, record in agent.sai.objects(T.MY_SID_ENTRY).items()
            if isinstance(record, MySidEntry)}
    lists = {}
    for key, oid in agent.config.refs.items():
        record = agent.sai.record(oid)
        if not isinstance(record, Srv6SidList):
            continue
        engine_index = getattr(seg6, "indexes", {}).get(oid)
        counts = shown.lists.get(engine_index, {}) if shown and engine_index else {}
        lists[key.split("|", 1)[1]] = {"segments": [str(s) for s in record.segment_list],
                                       **counts}
    return {"path": seg6.name, "sids": sids, "lists": lists, "counted": shown is not None,
            "te": agent.te.status()}


def ports(agent: Agent, request: dict[str, Any]) -> dict[str, str]:
    """Every front-panel port administratively up or down through SAI (the platform layer
    shuts a switch whose ASIC is past its critical temperature, as a real one protects
    itself); returns each port's status."""
    up = {"up": True, "down": False}[request["admin"]]
    agent.log.warning("ports admin %s: %s", request["admin"], request.get("why", ""))
    return {name: str(agent.sai.set(oid, "SAI_PORT_ATTR_ADMIN_STATE", up))
            for oid, name in sorted(agent.port_names.items(), key=lambda p: p[1])}


def handle(agent: Agent, request: dict[str, Any]) -> Any:
    cmd = request.get("cmd")
    if cmd == "status":
        return agent.status()
    if cmd == "dump":
        return dump(agent, request.get("types"))
    if cmd == "counters":
        return counters(agent)
    if cmd == "trace":
        return list(agent.sai.trace.lines)[-int(request.get("lines", 50)):]
    if cmd == "fault":
        return fault(agent, request)
    if cmd == "apply":
        changes = agent.apply_config(bool(request.get("dry_run")))
        return {"changes": [str(c) for c in changes], "failed": dict(agent.config.failed)}
    if cmd == "cable":
        return agent.measure_cables(list(request["ports"]))
    if cmd == "config":
        return {"file": str(agent.config_path), "error": agent.config_error,
                "objects": {key: _plain(ref) if isinstance(ref, int) else str(ref)
                            for key, ref in agent.config.refs.items()},
                "routes": sorted(str(p) for p in agent.orch.pinned),
                "failed": dict(agent.config.failed)}
    if cmd == "srv6":
        return srv6(agent)
    if cmd == "ports":
        return ports(agent, request)
    raise ValueError(f"unknown command {cmd!r}")
