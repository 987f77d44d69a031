"""The agent process: `python -m harness.nodes.switch.agent --node-dir DIR`, run inside a node
namespace.

One thread, one selector: the FPM listener and connection, the control socket, and two timers
(retry of failed SAI calls; the end of zebra's replay, after which stale routes are swept).
The SAI trace is written when nothing has arrived for a moment, off the path to the kernel.
The agent always boots warm: it reads back what the kernel holds (nothing on a fresh node) and
lets zebra's replay confirm it; its configuration channel (agent/config.py) claims back what
it had put there and applies the node's configuration document. Exiting never flushes the
dataplane, so traffic keeps flowing while the agent is down, exactly as an ASIC keeps
forwarding through a switch-OS restart.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import selectors
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

from pyroute2.netlink.rtnl.ifinfmsg import IFF_UP, ifinfmsg

from harness.core.events import Alarms
from harness.linux.files import replace_file
from harness.linux.nsenter import netlink
from harness.linux.rtnl_channel import Channel
from harness.nodes.port.redirect import TAP_PREFIX
from harness.nodes.switch.agent import cable
from harness.nodes.switch.agent.buffers import BufferOrch
from harness.nodes.switch.agent.client import CONFIG_FILE, SOCKET_NAME, TE_FILE, serve_one
from harness.nodes.switch.agent.config import (
    Change,
    ConfigError,
    ConfigOrch,
    Entry,
    applied_path,
    read,
)
from harness.nodes.switch.agent.control import handle
from harness.nodes.switch.agent.decode import decode
from harness.nodes.switch.agent.fpm import FPM_PORT, FpmError, FpmReader
from harness.nodes.switch.agent.orch import RouteOrch
from harness.nodes.switch.agent.te import TeOrch
from harness.nodes.switch.sai import srv6_engine
from harness.nodes.switch.sai.api import SaiSwitch
from harness.nodes.switch.sai.capacity import CapacityProfile, platform_capacity
from harness.nodes.switch.sai.kernel import SAI_TABLE, KernelBackend
from harness.nodes.switch.sai.mmu import PortSetup
from harness.nodes.switch.sai.seg6 import OWN_DEVICES, Srv6Setup
from harness.nodes.switch.sai.trace import Trace
from harness.nodes.switch.sai.types import ObjectType
from harness.topology.platforms import DEFAULT_PLATFORM, PLATFORMS

T = ObjectType
REPLAY_SETTLE_S = 3.0  # zebra pauses 1 s when its FPM buffer fills; a replay has gaps < 3 s
RETRY_S = 1.0
TRACE_IDLE_S = 0.05  # quiet this long, the agent writes its trace
RTM_GETLINK = 18
GC_YOUNG_THRESHOLD = 20_000  # allocations between young collections (Python's default: 700)


class Agent:
    def __init__(self, node_dir: Path, capacity: CapacityProfile, table: int = SAI_TABLE,
                 port: int = FPM_PORT, config: Path | None = None,
                 srv6: Srv6Setup | None = None, ports: PortSetup | None = None,
                 lab_dir: Path | None = None) -> None:
        self.node_dir = node_dir
        # said from zebra's first connection on: before it, the agent is booting, not failing
        self.alarm_log = Alarms(lab_dir, node_dir.name, "agent")
        self.config_path = config or node_dir / CONFIG_FILE
        self.port = port
        self.log = logging.getLogger("agent")
        self.base_capacity = capacity
        # Block-buffered and written when idle (see serve): a line-buffered file made one
        # write call per SAI call, a tenth of a 10k-route download's time.
        self._trace_file = open(node_dir / "sai.log", "a")  # noqa: SIM115
        self.backend = KernelBackend(table=table, srv6=srv6, ports=ports)
        self.sai = SaiSwitch(self.backend, capacity=capacity,
                             trace=Trace(sink=lambda line: self._trace_file.write(line + "\n")),
                             attrs={"SAI_SWITCH_ATTR_INIT_SWITCH": True,
                                    "SAI_SWITCH_ATTR_RESTART_WARM": True})
        self.orch = RouteOrch(self.sai)
        self.config = ConfigOrch(self.sai, self.orch,
                                 bound={"VIRTUAL_ROUTER|default": self.sai.default_vr})
        self.config_error: str | None = None  # the document on disk could not be applied
        self.entries: dict[str, Entry] = {}  # the document applied, tried again while it fails
        self.buffers = BufferOrch(self.sai, node_dir)
        self.te = TeOrch(self.config, self.orch)
        self.orch.claim = self.te.claim
        self.port_names: dict[int, str] = {}
        self.fpm: socket.socket | None = None
        self.reader = FpmReader()
        self.connected_at: float | None = None
        self.connections = 0
        self.replay_until: float | None = None
        self.swept = 0
        self.messages = 0
        self.started = time.time()

    # -- boot -----------------------------------------------------------------------------

    def create_ports(self) -> None:
        """One SAI port and router interface per interface of the node (lane = ifindex),
        with the admin state and MTU the kernel already has, so booting changes nothing, and
        the profile's speed until the configuration says otherwise."""
        channel = Channel()  # pyroute2's IPRoute would add 0.15 s to every switch's start
        try:
            links = list(channel.dump(ifinfmsg(), RTM_GETLINK, ifinfmsg))
        finally:
            channel.close()
        for link in links:
            name = link.get_attr("IFLA_IFNAME")
            if name in ("lo", srv6_engine.TAP, *OWN_DEVICES) or name.startswith(TAP_PREFIX):
                continue  # the SRv6 dataplane's and the port engine's own devices
            status, port = self.sai.create(T.PORT, {
                "SAI_PORT_ATTR_HW_LANE_LIST": [link["index"]],
                "SAI_PORT_ATTR_ADMIN_STATE": bool(link["flags"] & IFF_UP),
                "SAI_PORT_ATTR_MTU": link.get_attr("IFLA_MTU"),
                "SAI_PORT_ATTR_SPEED": self.sai.capacity.port_speed})
            if not status.ok:
                self.log.error("port %s: %s", name, status)
                continue
            status, rif = self.sai.create(T.ROUTER_INTERFACE, {
                "SAI_ROUTER_INTERFACE_ATTR_VIRTUAL_ROUTER_ID": self.sai.default_vr,
                "SAI_ROUTER_INTERFACE_ATTR_TYPE": "SAI_ROUTER_INTERFACE_TYPE_PORT",
                "SAI_ROUTER_INTERFACE_ATTR_PORT_ID": port,
                "SAI_ROUTER_INTERFACE_ATTR_SRC_MAC_ADDRESS": link.get_attr("IFLA_ADDRESS"),
                "SAI_ROUTER_INTERFACE_ATTR_MTU": link.get_attr("IFLA_MTU")})
            self.port_names[port] = name  # type: ignore[index]
            self.orch.rif_by_ifindex[link["index"]] = rif  # type: ignore[assignment]
            self.config.bound[f"PORT|{name}"] = port  # type: ignore[assignment]
            self.config.bound[f"ROUTER_INTERFACE|{name}"] = rif  # type: ignore[assignment]

    def boot(self) -> None:
        self.create_ports()
        adopted = self.sai.warm_adopt()
        entries = self.entries = self._read_config()
        claimed = self.config.claim(entries)
        self.orch.adopt(foreign=claimed)
        changes = self.config.apply(entries)
        self.te.load(self.node_dir / TE_FILE)
        self.buffers.restore(self.ports_by_name)
        if not self.backend.settle().ok:
            self.log.error("port engine: not settled after boot (see above)")
        self.log.info("booted: %d ports, %d objects read back from the kernel (%d routes, %d "
                      "claimed by the configuration), %d configuration changes",
                      len(self.port_names), adopted, len(self.orch.programmed), len(claimed),
                      len(changes))

    @property
    def ports_by_name(self) -> dict[str, int]:
        return {name: oid for oid, name in self.port_names.items()}

    # -- cable length and the lossless class's headroom ----------------------------------

    def measure_cables(self, ports: list[str]) -> list[dict[str, Any]]:
        """Each of `ports` measured to the agent at its far end, and its headroom set from
        it (agent/cable.py, agent/buffers.py); one that nothing answers on is said so."""
        by_name, rows = self.ports_by_name, []
        with netlink(None) as ip:
            addresses = {a["index"]: f"{a.get_attr('IFA_ADDRESS')}/{a['prefixlen']}"
                         for a in ip.get_addr(family=socket.AF_INET)}
        for name in ports:
            oid = by_name.get(name)
            lane = self.sai.record(oid).hw_lane_list[0] if oid else None  # type: ignore[union-attr]
            if lane not in addresses:
                raise ValueError(f"{name}: no such port with an IPv4 /31 on this switch")
            found = cable.measure(name, addresses[lane])
            rows.append(self.buffers.apply(found, oid) if found else  # type: ignore[arg-type]
                        {"port": name, "answered": 0, "status": "no agent answered"})
        return rows

    # -- configuration channel ------------------------------------------------------------

    def _read_config(self) -> dict[str, Entry]:
        """The document on disk; at boot a bad one is logged, kept as the node's degraded
        reason, and the last document applied serves instead (routes still flow, nothing
        configured is lost), where `apply` refuses it to the caller."""
        try:
            entries, text = read(self.config_path, set(self.config.bound))
        except ConfigError as exc:
            self.log.error("configuration refused, the last applied kept: %s", exc)
            self.config_error = str(exc)
            return read(applied_path(self.config_path), set(self.config.bound))[0]
        self.config_error = None
        self._keep_applied(text)
        return entries

    def _keep_applied(self, text: str) -> None:
        replace_file(applied_path(self.config_path), text)

    def apply_config(self, dry_run: bool) -> list[Change]:
        """`labctl sai NODE apply`: the document on disk, diffed against the switch."""
        entries, text = read(self.config_path, set(self.config.bound))  # ConfigError: raised
        changes = self.config.apply(entries, dry_run=dry_run)
        if not dry_run:
            self.entries = entries
            self.config_error = None
            self._keep_applied(text)
            self.te.load(self.node_dir / TE_FILE)
            for change in changes:
                self.log.info("configuration: %s", change)
        return changes

    # -- FPM ------------------------------------------------------------------------------

    def accept(self, listener: socket.socket, selector: selectors.BaseSelector) -> None:
        conn, peer = listener.accept()
        if self.fpm is not None:
            self.log.warning("new FPM connection replaces the old one")
            self.close_fpm(selector)
        conn.setblocking(False)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.fpm, self.reader = conn, FpmReader()
        self.connections += 1
        self.connected_at = time.monotonic()
        self.replay_until = self.connected_at + REPLAY_SETTLE_S
        selector.register(conn, selectors.EVENT_READ, "fpm")
        self.log.info("zebra connected from %s:%d; waiting for its replay", *peer[:2])

    def close_fpm(self, selector: selectors.BaseSelector) -> None:
        if self.fpm is not None:
            selector.unregister(self.fpm)
            self.fpm.close()
            self.fpm = None
            self.connected_at = None

    def read_fpm(self, selector: selectors.BaseSelector) -> None:
        assert self.fpm is not None
        try:
            data = self.fpm.recv(4 << 20)
        except BlockingIOError:
            return
        if not data:
            self.log.warning("zebra closed the FPM connection")
            self.close_fpm(selector)
            return
        try:
            events = [e for payload in self.reader.feed(data) for e in decode(payload)]
        except FpmError as exc:
            self.log.error("%s; dropping the connection (zebra reconnects and replays)", exc)
            self.close_fpm(selector)
            return
        self.messages += len(events)
        if self.replay_until is not None:
            self.replay_until = time.monotonic() + REPLAY_SETTLE_S
        self.orch.apply(events)

    def tick(self) -> None:
        if self.replay_until is not None and time.monotonic() > self.replay_until:
            self.replay_until = None
            swept = self.orch.sweep_stale()
            self.config.collect()  # SRv6 next hops only stale routes pointed at
            self.swept += swept
            self.log.info("replay settled: %d routes from zebra, %d stale removed, %d route "
                          "changes skipped as already programmed", len(self.orch.wanted), swept,
                          self.orch.calls_saved)
        if self.config.failed:  # e.g. a next hop the kernel refused while its address was new
            for change in self.config.apply(self.entries):
                self.log.info("configuration (retry): %s", change)
        self.te.cover()
        before = len(self.orch.failed)
        self.orch.retry()
        if before and not self.orch.failed:
            self.log.info("all %d failed routes are now programmed", before)

    def write_trace(self) -> None:
        self.sai.trace.flush()
        self._trace_file.flush()

    # -- state ----------------------------------------------------------------------------

    def alarms(self) -> dict[str, str]:
        """What an operator must know, by cause: a count in a text moves, the alarm stays."""
        faults = self.sai.faults.as_dict()
        found = {}
        if self.fpm is None:
            found["fpm"] = "zebra is not connected over FPM"
        if self.orch.failed:
            found["routes"] = f"{len(self.orch.failed)} route(s) not programmed (SAI errors)"
        if faults["rules"]:
            found["faults"] = (f"{len(faults['rules'])} fault rule(s) active, "
                               f"{faults['injected']} call(s) failed")
        if self.sai.capacity != self.base_capacity:
            found["capacity"] = f"capacity shrunk: {self.sai.capacity.name}"
        if self.config.failed:
            found["config"] = f"{len(self.config.failed)} configured object(s) not applied"
        if self.config_error:
            found["config document"] = "configuration document refused (see agent.log)"
        return found

    def status(self) -> dict[str, Any]:
        faults = self.sai.faults.as_dict()
        speeds = {name: self.sai.record(oid).speed  # type: ignore[union-attr]
                  for oid, name in self.port_names.items()}
        reasons = list(self.alarms().values())
        return {
            "pid": os.getpid(), "uptime_s": round(time.time() - self.started, 1),
            "srv6": self.backend.seg6.name if self.backend.seg6_chosen else "none yet",
            "fpm_connected": self.fpm is not None, "fpm_connections": self.connections,
            "replaying": self.replay_until is not None, "fpm_messages": self.messages,
            "routes_wanted": len(self.orch.wanted), "routes_programmed": len(self.orch.programmed),
            "routes_failed": {str(p): why for p, why in list(self.orch.failed.items())[:20]},
            "routes_failed_total": len(self.orch.failed),
            "routes_skipped": len(self.orch.skipped), "stale_swept": self.swept,
            "unchanged_skipped": self.orch.calls_saved,
            "next_hops": self.sai.count(T.NEXT_HOP),
            "next_hop_groups": self.sai.count(T.NEXT_HOP_GROUP),
            "sai_calls": self.sai.trace.calls, "sai_failures": self.sai.trace.failures,
            "faults": faults, "capacity": self.sai.capacity.as_dict(),
            "routes_overridden": self.orch.overridden, "config": self.config.status(),
            "lossless_headroom": {name: m.headroom(speeds[name] * 1_000_000).bytes
                                  for name, m in self.buffers.measured.items()},
            "port_speeds": speeds, "te": self.te.status(),
            "state": "degraded" if reasons else "running", "reasons": reasons}

    # -- loop -----------------------------------------------------------------------------

    def serve(self) -> None:
        selector = selectors.DefaultSelector()
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(4)
        control_path = self.node_dir / SOCKET_NAME
        control_path.unlink(missing_ok=True)
        control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        control.bind(str(control_path))
        control.listen(8)
        selector.register(listener, selectors.EVENT_READ, "listener")
        selector.register(control, selectors.EVENT_READ, "control")
        reflector = cable.Reflector()
        selector.register(reflector, selectors.EVENT_READ, "cable")
        self.log.info("listening for zebra on 127.0.0.1:%d, control on %s", self.port,
                      control_path)
        next_tick = time.monotonic() + RETRY_S
        while True:
            if (probes := self.te.open()) is not None:
                selector.register(probes, selectors.EVENT_READ, "te")
            timeout = max(0.0, min(next_tick, self.te.next_due) - time.monotonic())
            if self.sai.trace.pending:
                timeout = min(timeout, TRACE_IDLE_S)
            ready = selector.select(timeout)
            if not ready and self.sai.trace.pending:
                self.write_trace()
            for key, _ in ready:
                if key.data == "listener":
                    self.accept(listener, selector)
                elif key.data == "fpm":
                    self.read_fpm(selector)
                elif key.data == "cable":
                    reflector.reflect()
                elif key.data == "te":
                    self.te.receive()
                else:
                    serve_one(control, lambda request: handle(self, request), self.log)
            self.te.tick()
            if time.monotonic() >= next_tick:
                self.tick()
                next_tick = time.monotonic() + RETRY_S
            if self.connections:
                self.alarm_log.update(self.alarms())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.nodes.switch.agent")
    parser.add_argument("--node-dir", required=True, type=Path)
    parser.add_argument("--port", type=int, default=FPM_PORT)
    parser.add_argument("--table", type=int, default=SAI_TABLE)
    parser.add_argument("--platform", choices=sorted(PLATFORMS), default=DEFAULT_PLATFORM,
                        help="the switch platform whose SAI capacities the agent starts with")
    parser.add_argument("--config", type=Path, help="the configuration document (default: "
                        f"NODE_DIR/{CONFIG_FILE})")
    parser.add_argument("--srv6-engine", required=True, help="the fl-srv6 program, for where "
                        "the kernel has no seg6")
    parser.add_argument("--srv6-path", choices=("auto", "kernel", "userspace"), default="auto")
    parser.add_argument("--port-engine", help="the fl-port program, for ports whose queues, "
                        "buffers, ECN and PFC the configuration declares")
    parser.add_argument("--cable", action="append", default=[], metavar="PORT=US",
                        help="a port's planned cable, one way in microseconds (repeatable)")
    parser.add_argument("--lab-dir", type=Path, help="the lab whose event record gets the "
                        "agent's alarms as they are raised and cleared")
    args = parser.parse_args(argv)
    logging.basicConfig(filename=args.node_dir / "agent.log", level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(message)s")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    srv6 = Srv6Setup(args.node_dir, args.srv6_engine, args.srv6_path)
    cables = {port: float(us) for port, us in (c.split("=", 1) for c in args.cable)}
    ports = PortSetup(args.node_dir, args.port_engine, cables) if args.port_engine else None
    agent = Agent(args.node_dir, platform_capacity(PLATFORMS[args.platform]), args.table, args.port,
                  args.config, srv6, ports, args.lab_dir)
    agent.boot()
    # A FIB is many long-lived objects: the cyclic GC rescanning them took a quarter of a
    # 10k-route download. Boot's objects leave its scans; young collections run less often.
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD)
    agent.serve()
    return 0
