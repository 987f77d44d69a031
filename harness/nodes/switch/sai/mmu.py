"""The switch's buffers, queues, WRED and PFC, made by fl-port (harness/nodes/port) from SAI
objects, as an ASIC's MMU is programmed from them.

A port goes through the engine once a QUEUE object names it; the lab renders queues only
when its `qos:` section declares a buffer, so a lab that does not ask runs no engine and pays
nothing. For each such port the engine takes:

- its speed (SAI_PORT_ATTR_SPEED) as the line rate its egress drains at, and its DSCP -> TC
  and TC -> queue maps;
- SAI_PORT_ATTR_PRIORITY_FLOW_CONTROL, the priorities it pauses and honours PAUSE for;
- each INGRESS_PRIORITY_GROUP's BUFFER_PROFILE: reserved size, shared threshold (static or
  dynamic), XOFF_TH (the PFC headroom, which `labctl headroom` sets from the measured cable),
  XON_TH and XON_OFFSET_TH;
- each QUEUE's WRED profile (thresholds, probability, ECN mark mode), its buffer profile's
  threshold (a lossy queue's admission), and whether the PFC watchdog guards it, with the
  port's SAI_PORT_ATTR_PFC_TC_DLD_INTERVAL / _DLR_INTERVAL;
- the largest pool a profile of theirs draws on, as the shared buffer.

Commands are idempotent and sent only when changed. The engine outlives the agent: a new
agent reads its ports back and programs the same objects again, which changes nothing, so
queues, pauses and counters run on through a warm restart.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.errors import LabError
from harness.linux.nsenter import run_in
from harness.nodes.port import redirect
from harness.nodes.port.engine import Counters, PortEngine, class_maps
from harness.nodes.switch.sai.backend import ObjectView
from harness.nodes.switch.sai.headroom import pause_window_ns
from harness.nodes.switch.sai.records import (
    BufferPool,
    BufferProfile,
    IngressPriorityGroup,
    Port,
    QosMap,
    Queue,
    Wred,
)
from harness.nodes.switch.sai.status import Status
from harness.nodes.switch.sai.types import NULL_OID

log = logging.getLogger("agent")
MBIT = 1_000_000
DEFAULT_DETECT_MS, DEFAULT_RESTORE_MS = 200, 400  # SONiC's PFC watchdog defaults


@dataclass(frozen=True)
class PortSetup:
    """Where a switch's port engine lives if it needs one: the node's directory, the program,
    and each port's cable one way (us; the planned length: a port not named has a short one),
    which sets how much a sender on time lands after PAUSE (fl_port.c's pause window)."""

    directory: Path
    program: str
    cables_us: Mapping[str, float] = field(default_factory=dict)


def _threshold(profile: BufferProfile) -> str:
    if profile.threshold_mode.endswith("STATIC"):
        return f"static_th={profile.shared_static_th}"
    return f"dynamic_th={profile.shared_dynamic_th}"


def _pairs(view: ObjectView, oid: int) -> dict[int, int]:
    record = view.record(oid) if oid != NULL_OID else None
    return dict(record.map_to_value_list) if isinstance(record, QosMap) else {}


class Mmu:
    """One switch's fl-port, started when the first port needs it."""

    def __init__(self, netns_path: str | None, setup: PortSetup | None) -> None:
        self.netns_path, self.setup = netns_path, setup
        self.engine = PortEngine(setup.directory) if setup else None
        self.ids: dict[str, int] | None = None  # port name -> engine port id, once started
        self.sent: dict[str, str] = {}  # what each object last told the engine
        self.wired: frozenset[str] = frozenset()  # ports whose frames tc sends to the engine
        self.programmed: set[str] = set()  # ports this agent has told the engine about

    def served(self, view: ObjectView, port: int) -> bool:
        """Whether QUEUE objects name the port; if none do, it is the kernel's (HTB)."""
        return any(isinstance(view.record(ref), Queue) for ref in view.referrers(port))

    def counters(self) -> Counters | None:
        return self.engine.counters() if self.engine and self.ids is not None else None

    def _start(self) -> dict[str, int]:
        if self.ids is None:
            if self.engine is None or self.setup is None:
                raise LabError("this switch was started without a port engine (--port-engine)")
            adopted = self.engine.answers()
            self.engine.start([self.setup.program, "run", "switch", str(self.engine.control)],
                              self.netns_path)
            ports = self.engine.counters().ports if adopted else {}
            self.ids = {p.name: i for i, p in ports.items()}
            self.wired = frozenset(self.ids)  # a warm start finds the redirects in place
        return self.ids

    def _tell(self, key: str, command: str) -> None:
        if self.sent.get(key) != command:
            assert self.engine is not None
            self.engine.command(command)
            self.sent[key] = command

    def sync(self, view: ObjectView, ports: dict[int, str], *, prune: bool = False) -> Status:
        """Every port's engine state as the objects now say (`ports`: oid -> interface).
        A port a previous agent left in the engine stays until `prune` (the end of a warm
        boot, when the document has been applied whole): mid-boot, its queues may simply
        not have been made again yet."""
        served = {name: oid for oid, name in ports.items() if self.served(view, oid)}
        if not served and self.ids is None:
            return Status.SUCCESS
        try:
            ids = self._start()
            for name in sorted(served):
                ids.setdefault(name, min(set(range(64)) - set(ids.values())))
            pool = 0
            for name, oid in sorted(served.items()):
                pool = max(pool, self._port(view, ids[name], name, oid))
                self.programmed.add(name)
            if pool:
                self._tell("pool", f"pool size={pool}")
            self._tell("cpu", f"cpu tap={redirect.CPU_TAP}")
            keep = set(served) if prune else set(served) | (set(ids) - self.programmed)
            for name in sorted(set(ids) - keep):
                self._unport(ids.pop(name), name)
            self._wire(sorted(keep))
        except LabError as exc:
            log.error("port engine: %s", exc)
            return Status.FAILURE
        return Status.SUCCESS

    def _port(self, view: ObjectView, port_id: int, name: str, oid: int) -> int:
        """The port's commands; the largest pool its profiles draw on."""
        port: Port = view.record(oid)  # type: ignore[assignment]
        maps = class_maps(_pairs(view, port.qos_dscp_to_tc_map),
                          _pairs(view, port.qos_tc_to_queue_map))
        assert self.setup is not None
        window = pause_window_ns(self.setup.cables_us.get(name, 0.0))
        self._tell(f"port {name}", f"port {port_id} name={name} tap={redirect.tap_of(port_id)} "
                   f"speed_bps={port.speed * MBIT} {maps} pfc={port.priority_flow_control} "
                   f"pause_window_ns={window}")
        detect = dict(port.pfc_tc_dld_interval)
        restore = dict(port.pfc_tc_dlr_interval)
        action = "drop" if detect else "off"
        self._tell(f"watchdog {name}", f"watchdog {port_id} action={action} detect_ms="
                   f"{min(detect.values(), default=DEFAULT_DETECT_MS)} restore_ms="
                   f"{min(restore.values(), default=DEFAULT_RESTORE_MS)}")
        pool = 0
        for ref in view.referrers(oid):
            record = view.record(ref)
            if isinstance(record, IngressPriorityGroup) and record.buffer_profile != NULL_OID:
                profile: BufferProfile = view.record(record.buffer_profile)  # type: ignore
                pool = max(pool, self._pool_size(view, profile))
                self._tell(f"pg {name} {record.index}",
                           f"pg {port_id} {record.index} reserved={profile.reserved_buffer_size} "
                           f"xoff={profile.xoff_th} xon={profile.xon_th} "
                           f"xon_offset={profile.xon_offset_th} {_threshold(profile)}")
            elif isinstance(record, Queue):
                words = [f"queue {port_id} {record.index}",
                         f"guard={int(record.enable_pfc_dldr)}"]
                if record.buffer_profile_id != NULL_OID:
                    profile = view.record(record.buffer_profile_id)  # type: ignore[assignment]
                    pool = max(pool, self._pool_size(view, profile))
                    words.append(_threshold(profile))
                wred = view.record(record.wred_profile_id) \
                    if record.wred_profile_id != NULL_OID else None
                if isinstance(wred, Wred):
                    words += [f"wred=1 min={wred.green_min_threshold}",
                              f"max={wred.green_max_threshold}",
                              f"prob={wred.green_drop_probability}",
                              f"ecn={int(wred.marks)} drop={int(wred.green_enable)}"]
                else:
                    words.append("wred=0")
                self._tell(f"queue {name} {record.index}", " ".join(words))
        return pool

    @staticmethod
    def _pool_size(view: ObjectView, profile: BufferProfile) -> int:
        pool = view.record(profile.pool_id)
        return pool.size if isinstance(pool, BufferPool) else 0

    def _unport(self, port_id: int, name: str) -> None:
        if name in self.wired:
            run_in(self.netns_path, ["tc", *redirect.unredirect(name)])
            self.wired -= {name}
        assert self.engine is not None
        self.engine.command(f"unport {port_id}")
        self.sent = {k: v for k, v in self.sent.items() if k.split()[1:2] != [name]}
        self.programmed.discard(name)

    def _wire(self, names: list[str]) -> None:
        """nft marks by ingress port, and each port's redirects, when the set changed."""
        if frozenset(names) == self.wired:
            return
        assert self.ids is not None
        run_in(self.netns_path, ["nft", "-f", "-"],
               redirect.marks_ruleset({n: self.ids[n] for n in names}))
        ids = [self.ids[n] for n in names]
        commands: list[list[str]] = []
        for name in names:
            if name in self.wired:
                commands.append(redirect.unredirect(name))
            commands += redirect.switch_redirects(name, ids)
        run_in(self.netns_path, ["tc", "-batch", "-"], redirect.batch(commands))
        self.wired = frozenset(names)
