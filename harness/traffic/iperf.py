"""A TCP stream between two lab hosts' loopbacks with iperf3, for benches that compare paths
of one lab: what a user's own bulk transfer would get."""

from __future__ import annotations

import json
import subprocess
import time

from harness.core.errors import LabError
from harness.deploy.lab import Lab

PORT = 5201
START_S = 0.3  # the server listening before the client connects


def tcp_bytes_per_s(lab: Lab, src: str, dst: str, seconds: float, *, ipv6: bool = True) -> float:
    """The bytes a second `dst` received from one TCP stream `src` sent for `seconds`."""
    node = lab.plan.node(dst)
    address = node.loopback6 if ipv6 else node.loopback4
    server = lab.node(dst).popen(["iperf3", "-s", "-1", "-p", str(PORT)],
                                 stdout=subprocess.DEVNULL)
    try:
        time.sleep(START_S)
        out = lab.node(src).cmd("iperf3", "-c", str(address), "-p", str(PORT), "-t",
                                str(seconds), "-J", timeout=seconds + 30)
        server.wait(timeout=10)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    report = json.loads(out.stdout or "{}")
    if "error" in report or "end" not in report:
        raise LabError(f"iperf3 {src} -> {dst} failed: {report.get('error', out.stderr)}")
    return report["end"]["sum_received"]["bytes"] / report["end"]["sum_received"]["seconds"]
