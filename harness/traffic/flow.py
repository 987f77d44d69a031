"""Run one flow between two hosts of a lab, optionally with faults injected at set times.

Sender and receiver are small Python programs started inside the hosts' namespaces; they use
the GPU-facing addresses (loopbacks), so the flow is sprayed exactly like application
traffic. Both timestamp on CLOCK_MONOTONIC, which all namespaces share (the receiver takes the
kernel's arrival stamp, not its own wake-up), so one-way latency and fault times are on one
clock.
"""

from __future__ import annotations

import json
import subprocess
import time
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from harness.core.errors import LabError
from harness.core.events import say_at
from harness.spray.nic import nic_planes
from harness.traffic.analysis import FlowResult, analyse
from harness.traffic.wire import MIN_SIZE

if TYPE_CHECKING:
    from harness.runtime.context import LabContext

DRAIN_S = 0.3  # packets still in flight when the sender finishes
Action = tuple[float, str, Callable[[], object]]  # (seconds after start, label, what to do)


def _python(lab: LabContext, module: str, *args: object) -> list[str]:
    return lab.runtime.python(f"harness.traffic.{module}", *map(str, args))


def run_flow(lab: LabContext, src: str, dst: str, *, rate_pps: float = 2000, count: int = 10_000,
             size: int = 64, port: int = 7000, sport: int = 7000, ipv6: bool = False,
             actions: Sequence[Action] = ()) -> FlowResult:
    """Send `count` packets src -> dst at `rate_pps`; run each action at its offset from the
    sender's first packet."""
    if size < MIN_SIZE:
        raise LabError(f"flow packets need at least {MIN_SIZE} bytes, not {size}")
    src_node, dst_node = lab.plan.node(src), lab.plan.node(dst)
    src_addr = src_node.loopback6 if ipv6 else src_node.loopback4
    dst_addr = dst_node.loopback6 if ipv6 else dst_node.loopback4
    workdir = lab.dir / "flows"
    workdir.mkdir(exist_ok=True)
    tag = f"{src}-{dst}-{time.monotonic_ns()}"
    send_log, recv_file = workdir / f"{tag}.send", workdir / f"{tag}.recv.json"
    receiver = lab.node(dst).popen(_python(lab, "receiver", dst_addr, port, recv_file),
                                   stdout=subprocess.PIPE, text=True)
    try:
        if receiver.stdout is None or receiver.stdout.readline().strip() != "ready":
            raise LabError(f"{dst}: flow receiver did not start (exit {receiver.poll()})")
        sender = lab.node(src).popen(_python(lab, "sender", src_addr, sport, dst_addr, port,
                                             rate_pps, count, size, send_log),
                                     stdout=subprocess.PIPE, text=True)
        assert sender.stdout is not None
        started = sender.stdout.readline().strip()
        if not started.isdigit():
            raise LabError(f"{src}: flow sender did not start (exit {sender.wait(timeout=30)})")
        marks = run_actions(actions, int(started))
        if sender.wait(timeout=count / rate_pps + 60) != 0:
            raise LabError(f"{src}: flow sender failed (exit {sender.returncode})")
        time.sleep(DRAIN_S)
    finally:
        receiver.terminate()
        receiver.wait(timeout=30)
    send_ns = array("Q")
    with open(send_log, "rb") as f:
        send_ns.frombytes(f.read())
    arrivals = json.loads(Path(recv_file).read_text())
    send_log.unlink()
    recv_file.unlink()
    result = analyse(src, dst, send_ns, arrivals, nic_planes(lab.plan, dst_node), rate_pps,
                     marks)
    say_flow(lab, result)
    return result


def say_flow(lab: LabContext, result: FlowResult) -> None:
    """The flow in the lab's event record, stamped when it began: what it sent and lost, and
    its loss window from that start (the report's outage is last - first + one interval)."""
    wall_ns = time.time_ns() - time.monotonic_ns()  # the flow stamped CLOCK_MONOTONIC
    say_at(lab.dir, (result.start_ns + wall_ns) / 1e9, "flow", "ran", result.src,
           dst=result.dst, sent=result.sent, received=result.received, lost=result.lost,
           rate_pps=result.rate_pps, duration_s=result.duration_s,
           first_loss_s=result.first_loss_s, last_loss_s=result.last_loss_s)


def run_actions(actions: Sequence[Action], started_ns: int) -> dict[str, int]:
    """Each action at its offset from `started_ns`; when each ran, by label."""
    marks = {}
    for offset, label, action in sorted(actions, key=lambda a: a[0]):
        delay = started_ns / 1e9 + offset - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        marks[label] = time.monotonic_ns()
        action()
    return marks
