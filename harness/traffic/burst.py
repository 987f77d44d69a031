"""A burst of RoCE-marked datagrams over one link into a lossless class: what was received,
and what the link engine's PFC model did (drops, pauses, peak queue).

The sender writes as fast as its socket takes datagrams; the link engine serialises them at
the impairment's line rate, so the far port sees the line rate for as long as the burst
lasts. Datagrams carry a sequence number; the receiver counts distinct ones until the link
has been idle for IDLE_S.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.core.errors import LabError
from harness.links import impair
from harness.topology.plan import Endpoint, Impairment

if TYPE_CHECKING:
    from harness.runtime.context import LabContext

ROCE_PORT = 4791  # RoCEv2's UDP port
IDLE_S = 2.0
SEND = """
import socket, sys, time
src, dsts, port, count, size, tos, pps = (sys.argv[1], sys.argv[2].split(","),
                                          *map(int, sys.argv[3:7]), float(sys.argv[7]))
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
s.bind((src, 0))
start = time.monotonic()
for i in range(count * len(dsts)):
    if pps and i % 8 == 0:
        time.sleep(max(0.0, start + i / pps - time.monotonic()))
    s.sendto((i // len(dsts)).to_bytes(4, "big") + bytes(size - 4), (dsts[i % len(dsts)], port))
"""  # argv: source, destinations (comma-separated: `count` to each, in turn), port, count,
#      size, TOS byte (DSCP << 2 | ECN), datagrams per second (0: as fast as the socket takes)
RECEIVE = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 24)
s.bind((sys.argv[1], int(sys.argv[2])))
print("ready", flush=True)
s.settimeout(30)
seen = set()
try:
    while True:
        seen.add(int.from_bytes(s.recv(65536)[:4], "big"))
        s.settimeout(float(sys.argv[3]))
except TimeoutError:
    pass
print(len(seen))
"""


@dataclass(frozen=True)
class BurstResult:
    sent: int
    received: int
    dropped: int  # by the far port's full headroom (the engine's pfc_dropped)
    pauses: int
    peak: int  # the far port's queue, bytes


def _address(lab: LabContext, end: Endpoint) -> str:
    iface = next(i for i in lab.plan.node(end.node).interfaces if i.name == end.iface)
    if not iface.ipv4:
        raise LabError(f"{end} has no IPv4 address to send a burst to")
    return iface.ipv4.split("/")[0]


def _counters(lab: LabContext, end: Endpoint) -> dict[str, int]:
    return next(r.counters for r in impair.show(lab) if r.endpoint == end)


def lossless_burst(lab: LabContext, sender: Endpoint, impairment: Impairment, *,
                   count: int, size: int) -> BurstResult:
    """`count` datagrams of `size` bytes from `sender` to the far end of its link, marked
    with the class's DSCP, while `impairment` (with a lossless class) is on the sender's
    egress; the link's planned impairment is back afterwards."""
    if impairment.lossless is None:
        raise LabError("a lossless burst needs an impairment with a lossless class")
    receiver = lab.plan.peer_of(sender)
    with impair.temporarily(lab, [sender], impairment):
        before = _counters(lab, sender)
        rx = lab.node(receiver.node).popen(
            [sys.executable, "-c", RECEIVE, _address(lab, receiver), str(ROCE_PORT),
             str(IDLE_S)], stdout=subprocess.PIPE, text=True)
        try:
            if rx.stdout is None or rx.stdout.readline().strip() != "ready":
                raise LabError(f"{receiver.node}: burst receiver did not start")
            tos = (impairment.lossless.dscp or 0) << 2
            lab.node(sender.node).cmd(
                sys.executable, "-c", SEND, _address(lab, sender), _address(lab, receiver),
                str(ROCE_PORT), str(count), str(size), str(tos), "0", check=True, timeout=60)
            received = int(rx.communicate(timeout=60)[0].strip() or 0)
        finally:
            rx.kill()
            rx.wait()
        after = _counters(lab, sender)
    return BurstResult(count, received, after["pfc_dropped"] - before["pfc_dropped"],
                       after["pfc_pauses"] - before["pfc_pauses"], after["pfc_peak"])
