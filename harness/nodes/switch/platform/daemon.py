"""The platform daemon, one per SAI switch, inside the node beside its agent: it runs the
thermal policy once a second, keeps platform.json current (inspect and evidence read it),
answers `labctl platform` on platform.sock, and protects the switch as real platform software
does: an ASIC past its critical temperature gets every port shut down through the SAI agent,
and its ports come back once every sensor is below its high threshold again.

Requests: {"cmd": "show"} (the state, its alarms and diagnostics), {"cmd": "fail", "part":
"fan" | "psu" | "sensor", "name": N, "celsius": C}, {"cmd": "set", "part": "fan" | "psu" |
"sensor" | "led" | "management", "name": N, "value": V}, {"cmd": "firmware", "component": C,
"version": V}.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import selectors
import socket
import sys
import time
from pathlib import Path
from typing import Any

from harness.core.errors import LabError
from harness.core.events import Alarms
from harness.linux.files import replace_file
from harness.nodes.switch.agent.client import ask, serve_one
from harness.nodes.switch.platform.model import FIRMWARE, PlatformState, from_dict

STATE_FILE, SOCKET_NAME, LOG_FILE = "platform.json", "platform.sock", "platform.log"
DAEMON = ("platform daemon", SOCKET_NAME, LOG_FILE)  # for harness.nodes.switch.agent.client.ask
TICK_S = 1.0
WATTS_IDLE, WATTS_PER_PORT = 350.0, 15.0


class Daemon:
    def __init__(self, node_dir: Path, lab_dir: Path | None = None) -> None:
        self.node_dir = node_dir
        self.alarms = Alarms(lab_dir, node_dir.name, "platform")
        self.path = node_dir / STATE_FILE
        self.state: PlatformState = from_dict(json.loads(self.path.read_text()))
        self.written: PlatformState | None = None  # what platform.json holds
        self.log = logging.getLogger("platform")

    def tick(self) -> None:
        self.state.step(WATTS_IDLE + WATTS_PER_PORT * len(self.state.optics))
        self.alarms.update(self.state.raised())  # said before what the platform does about it
        hot = self.state.overheated()
        if hot and not self.state.ports_shut:
            why = "; ".join(f"{s.name} {s.celsius:g} C >= critical {s.critical:g} C"
                            for s in hot)
            self._ports("down", why)
        elif self.state.ports_shut and all(s.celsius < s.high for s in self.state.sensors):
            self._ports("up", "every sensor below its high threshold again")
        if self.state != self.written:  # a steady switch's is the same at every tick
            replace_file(self.path, json.dumps(self.state.to_dict(), indent=1) + "\n")
            self.written = copy.deepcopy(self.state)

    def _ports(self, admin: str, why: str) -> None:
        try:
            ask(self.node_dir, {"cmd": "ports", "admin": admin, "why": why})
        except LabError as exc:  # the agent restarting: the next tick tries again
            self.log.warning("ports %s not done: %s", admin, exc)
            return
        self.state.ports_shut = admin == "down"
        self.log.warning("ports %s: %s", admin, why)

    def handle(self, request: dict[str, Any]) -> Any:
        cmd = request.get("cmd")
        if cmd == "show":
            return {**self.state.to_dict(), "diagnostics": self.diagnostics()}
        if cmd == "fail":
            self._fail(request["part"], request["name"], request.get("celsius"))
        elif cmd == "set":
            self._set(request["part"], request["name"], request["value"])
        elif cmd == "firmware":
            component = request["component"]
            if component not in FIRMWARE:
                raise ValueError(f"no firmware {component!r}; there is {', '.join(FIRMWARE)}")
            old, self.state.firmware[component] = (self.state.firmware[component],
                                                   request["version"])
            self.log.warning("firmware %s: %s -> %s", component, old, request["version"])
        else:
            raise ValueError(f"unknown command {cmd!r}: show, fail, set or firmware")
        self.tick()  # act now, not at the next tick
        return self.state.to_dict()

    def _fail(self, part: str, name: str, celsius: float | None) -> None:
        if part == "fan":
            self.state.fan(name).ok = False
        elif part == "psu":
            present = [p for p in self.state.psus if p.present and p.name != name]
            if not present:
                raise ValueError(f"{name} is the last PSU in: pulling it powers the switch "
                                 "off; that is a node crash (labctl fault LAB node-crash NODE)")
            self.state.psu(name).present = False
        elif part == "sensor":
            if celsius is None:
                raise ValueError("a sensor fails with a reading: give celsius")
            self.state.sensor(name).forced = float(celsius)
        else:
            raise ValueError(f"part {part!r}: fan, psu or sensor")

    def _set(self, part: str, name: str, value: Any) -> None:
        if part == "fan":
            self.state.fan(name).ok = value == "ok"
        elif part == "psu":
            self.state.psu(name).present = value == "present"
        elif part == "sensor":
            self.state.sensor(name).forced = None if value == "auto" else float(value)
        elif part == "led":
            if name not in self.state.leds:
                raise ValueError(f"no LED {name!r}; there are {', '.join(self.state.leds)}")
            self.state.leds[name] = str(value)
        elif part == "management":
            self.state.oob["management"] = str(value)
        else:
            raise ValueError(f"part {part!r}: fan, psu, sensor, led or management")

    def diagnostics(self) -> list[dict[str, Any]]:
        """What a platform's self-test checks: the ASIC's agent answers and holds a port per
        optic, zebra feeds it, and the power and thermal parts are whole."""
        try:
            agent = ask(self.node_dir, {"cmd": "status"}, timeout=3)
            results = [("asic agent", True, f"pid {agent['pid']}, state {agent['state']}"),
                       ("ports", len(agent["port_speeds"]) == len(self.state.optics),
                        f"{len(agent['port_speeds'])} in SAI, {len(self.state.optics)} optics"),
                       ("fpm", agent["fpm_connected"], "zebra connected" if
                        agent["fpm_connected"] else "zebra not connected")]
        except LabError as exc:
            results = [("asic agent", False, str(exc))]
        results += [("fans", all(f.ok for f in self.state.fans),
                     ", ".join(f"{f.name} {f.rpm} rpm" for f in self.state.fans)),
                    ("psus", all(p.present for p in self.state.psus),
                     ", ".join(f"{p.name} {'in' if p.present else 'out'}"
                               for p in self.state.psus)),
                    ("thermal", all(s.celsius < s.high for s in self.state.sensors),
                     ", ".join(f"{s.name} {s.celsius:g} C" for s in self.state.sensors))]
        return [{"test": t, "ok": ok, "detail": d} for t, ok, d in results]

    def serve(self) -> None:
        path = self.node_dir / SOCKET_NAME
        path.unlink(missing_ok=True)
        control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        control.bind(str(path))
        control.listen(8)
        selector = selectors.DefaultSelector()
        selector.register(control, selectors.EVENT_READ)
        self.tick()
        next_tick = time.monotonic() + TICK_S
        while True:
            if selector.select(max(0.0, next_tick - time.monotonic())):
                serve_one(control, self.handle, self.log)
            if time.monotonic() >= next_tick:
                self.tick()
                next_tick = time.monotonic() + TICK_S


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.nodes.switch.platform")
    parser.add_argument("--node-dir", required=True, type=Path)
    parser.add_argument("--lab-dir", type=Path, help="the lab whose event record gets the "
                        "alarms as they are raised and cleared")
    args = parser.parse_args(argv)
    logging.basicConfig(filename=args.node_dir / LOG_FILE, level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(message)s")
    Daemon(args.node_dir, args.lab_dir).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
