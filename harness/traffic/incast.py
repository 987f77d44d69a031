"""An N:1 incast of RoCE-marked datagrams between lab nodes: what each sender got through,
the CE marks the receiver saw, and the PAUSE frames a capture saw on each sender's link.

Every sender starts at once; the receiver counts distinct datagrams per source and reads the
ECN bits of each packet's TOS (IP_RECVTOS) until its port has been idle for `idle_s`.
tcpdump on each sender's link counts MAC control frames (EtherType 0x8808) while it runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from harness.core.errors import LabError
from harness.topology.plan import Endpoint
from harness.traffic.burst import ROCE_PORT, SEND

if TYPE_CHECKING:
    from harness.runtime.context import LabContext

ECT0 = 0b10
CAPTURE_START_S = 0.5  # tcpdump's own start, before the first frame it must see
RECEIVE = """
import json, socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 25)
s.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
s.bind(("0.0.0.0", int(sys.argv[1])))
print("ready", flush=True)
s.settimeout(60)
seen, ce, first, last = {}, 0, None, None
try:
    while True:
        data, anc, _, (src, _) = s.recvmsg(65536, 64)
        last = time.monotonic()
        first = first or last
        seen.setdefault(src, set()).add(int.from_bytes(data[:4], "big"))
        ce += any(c[1] == socket.IP_TOS and c[2][0] & 3 == 3 for c in anc)
        s.settimeout(float(sys.argv[2]))
except TimeoutError:
    pass
print(json.dumps({"received": {k: len(v) for k, v in seen.items()}, "ce": ce,
                  "seconds": (last - first) if first else 0}))
"""  # argv: port, idle seconds


@dataclass
class Burst:
    sent: int  # per sender
    senders: list[str]  # their addresses
    received: dict[str, int]  # per sender address
    ce: int
    seconds: float  # first to last datagram at the receiver
    pauses_on_wire: dict[str, int]  # PAUSE frames captured on each sender's link

    @property
    def lost(self) -> int:
        return sum(self.sent - self.received.get(a, 0) for a in self.senders)


class Host(NamedTuple):
    """Where a sender or the receiver runs: its node (or namespace), link and address."""

    node: str
    iface: str
    address: str


Popen = Callable[..., subprocess.Popen]  # (node, argv, **Popen's keywords) -> the process


def run(popen: Popen, senders: list[Host], receiver: Host, count: int, size: int, tos: int,
        idle_s: float = 2.0, victim: Host | None = None, pps: float = 0
        ) -> tuple[Burst, Burst | None]:
    """The incast, with `popen` starting each program on its node; each flow's counts. With
    a `victim`, the first sender's datagrams alternate between the receiver and the victim
    (`count` each), so the two flows share that sender's port frame by frame. `pps` paces
    each sender (0: as fast as its socket takes them)."""
    receivers = [receiver, *([victim] if victim else [])]
    flows = [(s, [receiver, *([victim] if victim and i == 0 else [])])
             for i, s in enumerate(senders)]
    listening = [popen(r.node, [sys.executable, "-c", RECEIVE, str(ROCE_PORT), str(idle_s)],
                       stdout=subprocess.PIPE, text=True) for r in receivers]
    captures = [popen(s.node, ["tcpdump", "-i", s.iface, "-nn", "-l", "-q", "ether", "proto",
                               "0x8808"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                      text=True) for s in senders]
    try:
        for r, rx in zip(receivers, listening, strict=True):
            if rx.stdout is None or rx.stdout.readline().strip() != "ready":
                raise LabError(f"{r.node}: incast receiver did not start")
        time.sleep(CAPTURE_START_S)
        running = [popen(s.node, [sys.executable, "-c", SEND, s.address,
                                  ",".join(to.address for to in dsts), str(ROCE_PORT),
                                  str(count), str(size), str(tos), str(pps)],
                         stderr=subprocess.PIPE, text=True) for s, dsts in flows]
        for (s, _), process in zip(flows, running, strict=True):
            if process.wait(timeout=120):
                raise LabError(f"{s.node}: the sender failed: {process.communicate()[1]}")
        counts = []
        for r, rx in zip(receivers, listening, strict=True):
            counted = rx.communicate(timeout=180)[0]
            if not counted:
                raise LabError(f"{r.node}: the incast receiver ended without its counts")
            counts.append(json.loads(counted))
    finally:
        for process in [*captures, *listening]:
            process.terminate()
    pauses = {s.node: sum(1 for line in c.communicate(timeout=10)[0].splitlines() if line)
              for s, c in zip(senders, captures, strict=True)}  # tcpdump ends with a blank
    for rx in listening:
        rx.wait()
    main = Burst(count, [s.address for s in senders], counts[0]["received"], counts[0]["ce"],
                 counts[0]["seconds"], pauses)
    if victim is None:
        return main, None
    return main, Burst(count, [senders[0].address], counts[1]["received"], counts[1]["ce"],
                       counts[1]["seconds"], {})


def _host(lab: LabContext, end: Endpoint) -> Host:
    """The node's loopback (what the fabric routes), else the link's own address."""
    node = lab.plan.node(end.node)
    iface = next(i for i in node.interfaces if i.name == end.iface)
    address = node.loopback4 or (iface.ipv4 or "").split("/")[0]
    if not address:
        raise LabError(f"{end} has no IPv4 address to send from or to")
    return Host(end.node, end.iface, address)


def incast(lab: LabContext, senders: list[Endpoint], receiver: Endpoint, count: int,
           size: int = 1400, dscp: int = 3, idle_s: float = 2.0, pps: float = 0) -> Burst:
    """Each of `senders` sends `count` datagrams of `size` bytes, DSCP `dscp` and ECT(0),
    at once to `receiver`, each at `pps` (0: as fast as its socket takes them)."""
    return run(lambda node, argv, **kw: lab.node(node).popen(argv, **kw),
               [_host(lab, s) for s in senders], _host(lab, receiver), count, size,
               dscp << 2 | ECT0, idle_s, pps=pps)[0]
