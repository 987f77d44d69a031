#!/usr/bin/env python3
"""Record what a real zebra sends over FPM, for the decoder's unit tests
(tests/corpus/fpm/). Run as root with FRR installed; rerun when FRR's version changes.

Deploys the small SAI fabric, stops leaf1's agent and listens on the FPM port in its place:
zebra reconnects and replays its FIB (ECMP loopbacks over both spines, connected routes),
then the tool adds static routes (an IPv4 ECMP pair, an IPv6 route, a blackhole) and removes
one. The bytes go to zebra-<version>.fpm; what was configured to zebra-<version>.json.

    sudo .venv/bin/python tests/tools/capture_fpm.py
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from harness.core.paths import FRR_SBIN  # noqa: E402
from harness.deploy.lab import deploy  # noqa: E402
from harness.linux.nsenter import call_in_netns  # noqa: E402
from harness.linux.processes import kill_and_reap  # noqa: E402
from harness.nodes.switch.agent.client import ask  # noqa: E402
from harness.nodes.switch.agent.fpm import FPM_PORT  # noqa: E402

OUT = REPO / "tests" / "corpus" / "fpm"


def main() -> int:
    version = subprocess.run([str(FRR_SBIN / "zebra"), "--version"], capture_output=True,
                             text=True).stdout.split()[2]
    lab = deploy(REPO / "topologies" / "sai-fabric.yml", name="fpmcapture", timeout=120)
    try:
        leaf1 = lab.frr("leaf1")
        kill_and_reap([int(ask(leaf1.workdir, {"cmd": "status"})["pid"])])
        server = call_in_netns(lab.runtime.netns_path("leaf1"), lambda: socket.create_server(
            ("127.0.0.1", FPM_PORT), reuse_port=True))
        captured = bytearray()

        def record() -> None:
            conn, _ = server.accept()
            conn.settimeout(1.0)
            while not stop.is_set():
                try:
                    if not (data := conn.recv(1 << 16)):
                        return
                    captured.extend(data)
                except TimeoutError:
                    continue

        stop = threading.Event()
        thread = threading.Thread(target=record)
        thread.start()
        time.sleep(8)  # zebra's reconnect timer, then its replay
        via = [i for i in lab.plan.node("leaf1").interfaces if i.name in ("eth1", "eth2")]
        gateways = [next(p.ipv4 for p in lab.plan.node(i.peer.node).interfaces
                         if p.name == i.peer.iface).split("/")[0] for i in via]
        gw6 = next(p.ipv6 for p in lab.plan.node(via[0].peer.node).interfaces
                   if p.name == via[0].peer.iface).split("/")[0]
        statics = {"ecmp": ["10.77.0.0/24", gateways], "v6": ["fd77::/64", [gw6]],
                   "blackhole": ["10.88.0.0/24", []], "removed": "10.99.0.0/24"}
        leaf1.vtysh("configure terminal", *(f"ip route 10.77.0.0/24 {g}" for g in gateways),
                    f"ipv6 route fd77::/64 {gw6}", "ip route 10.88.0.0/24 blackhole",
                    f"ip route 10.99.0.0/24 {gateways[0]}")
        time.sleep(2)
        leaf1.vtysh("configure terminal", f"no ip route 10.99.0.0/24 {gateways[0]}")
        time.sleep(2)
        stop.set()
        thread.join()
        loopbacks = {n.name: n.loopback4 for n in lab.plan.nodes if n.name != "leaf1"}
    finally:
        lab.destroy()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"zebra-{version}.fpm").write_bytes(bytes(captured))
    (OUT / f"zebra-{version}.json").write_text(json.dumps(
        {"frr": version, "statics": statics, "loopbacks": loopbacks}, indent=1) + "\n")
    print(f"{len(captured)} bytes from zebra {version} -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
