"""An N:1 incast through one switch whose ports are fl-port engines, in scratch namespaces.

N senders, each on its own switch port, send a burst of RoCE-marked datagrams (DSCP 26,
ECT(0)) at once to one receiver; the switch's port to the receiver drains at its line rate,
so its lossless queue fills. The switch's engine runs as a SAI switch programs it (shared
pool, a lossless priority group per ingress port with its headroom, WRED on the egress
queue); each sender's NIC engine honours PAUSE. The receiver counts distinct datagrams per
sender and CE marks from each packet's TOS byte; a packet socket on every sender's port counts
the PAUSE frames that reach it on the wire. Used by the e2e tests and bench/congestion.py.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.build import built
from harness.core.wait import wait_until
from harness.links.port import redirect
from harness.links.port.engine import ENGINE, Counters, PortEngine
from harness.linux.nsenter import NETNS_RUN_DIR, run_in
from harness.linux.scratch import remove, scratch_name
from harness.traffic.burst import SEND

LOSSLESS_DSCP = 26
LOSSLESS_TC = 3
ECT0 = 0b10
PORT = 4791
DSCP_TC = "".join(str(LOSSLESS_TC) if d == LOSSLESS_DSCP else "0" for d in range(64))

# Distinct datagrams per sender and CE marks, until the port has been idle for argv[2] s.
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
"""


@dataclass(frozen=True)
class Buffers:
    """The switch's buffer settings, as SAI objects carry them."""

    pool: int = 400_000
    shared: int = 30_000  # a lossless group's static shared threshold (its XOFF point)
    headroom: int = 30_000  # XOFF_TH: what arrives after PAUSE went out
    xon_offset: int = 3_000
    queue_limit: int = 60_000  # a lossy queue's static threshold
    wred: tuple[int, int, int] | None = (10_000, 40_000, 50)  # min, max, probability %


@dataclass
class Result:
    sent: int  # per sender
    received: dict[str, int]
    ce: int
    seconds: float
    pauses_on_wire: dict[str, int]  # PAUSE frames captured at each sender's port
    switch: Counters
    nics: dict[str, Counters] = field(default_factory=dict)

    senders: list[str] = field(default_factory=list)  # their addresses

    @property
    def lost(self) -> int:
        return sum(self.sent - self.received.get(a, 0) for a in self.senders)


FABRICS = itertools.count()


def _ns(name: str) -> str:
    return f"{NETNS_RUN_DIR}/{name}"


class Incast:
    """The scratch fabric: `senders` hosts and a receiver on one switch."""

    def __init__(self, directory: Path, senders: int, host_bps: int, port_bps: int,
                 buffers: Buffers, pfc: bool = True) -> None:
        self.dir, self.n, self.host_bps, self.port_bps = directory, senders, host_bps, port_bps
        self.buffers, self.pfc = buffers, pfc
        tag = next(FABRICS)  # fabrics alive at once get names of their own
        self.switch = scratch_name(f"i{tag}sw")
        self.hosts = [scratch_name(f"i{tag}h{i}") for i in range(senders + 1)]  # last: receiver
        self.engines: dict[str, PortEngine] = {}

    def address(self, i: int) -> str:
        return f"10.77.{i}.2"

    def build(self) -> None:
        program = str(built(ENGINE))
        self.dir.mkdir(parents=True, exist_ok=True)
        for name in [self.switch, *self.hosts]:
            subprocess.run(["ip", "netns", "add", name], check=True)
            run_in(_ns(name), ["ip", "link", "set", "lo", "up"])
        run_in(_ns(self.switch), ["sysctl", "-qw", "net.ipv4.ip_forward=1"])
        for i, host in enumerate(self.hosts):
            subprocess.run(["ip", "link", "add", "eth0", "netns", host, "type", "veth", "peer",
                            "name", f"p{i}", "netns", self.switch], check=True)
            run_in(_ns(host), ["ip", "addr", "add", f"{self.address(i)}/24", "dev", "eth0"])
            run_in(_ns(host), ["ip", "link", "set", "eth0", "up"])
            run_in(_ns(host), ["ip", "route", "add", "default", "via", f"10.77.{i}.1"])
            run_in(_ns(self.switch), ["ip", "addr", "add", f"10.77.{i}.1/24", "dev", f"p{i}"])
            run_in(_ns(self.switch), ["ip", "link", "set", f"p{i}", "up"])
        sw = self.engines["switch"] = PortEngine(self.dir, "switch")
        sw.start([program, "run", "switch", str(sw.control)], _ns(self.switch))
        b = self.buffers
        sw.command(f"pool size={b.pool}")
        ports = {f"p{i}": i for i in range(len(self.hosts))}
        for name, i in ports.items():
            sw.command(f"port {i} name={name} tap={redirect.tap_of(i)} "
                       f"speed_bps={self.port_bps} dscp_tc={DSCP_TC} "
                       f"pfc={1 << LOSSLESS_TC if self.pfc else 0}")
            sw.command(f"pg {i} {LOSSLESS_TC} reserved=0 xoff={b.headroom} "
                       f"xon_offset={b.xon_offset} static_th={b.shared}")
            sw.command(f"queue {i} {LOSSLESS_TC} static_th={b.queue_limit}"
                       + (f" wred=1 min={b.wred[0]} max={b.wred[1]} prob={b.wred[2]} ecn=1"
                          if b.wred else ""))
        sw.command(f"cpu tap={redirect.CPU_TAP}")
        run_in(_ns(self.switch), ["nft", "-f", "-"], redirect.marks_ruleset(ports))
        run_in(_ns(self.switch), ["tc", "-batch", "-"], "".join(
            line + "\n" for name in ports for line in redirect.switch_redirects(
                name, list(ports.values()))))
        for i, host in enumerate(self.hosts[:-1]):
            nic = self.engines[f"h{i}"] = PortEngine(self.dir, f"h{i}")
            nic.start([program, "run", "nic", str(nic.control)], _ns(host))
            nic.command(f"port 0 name=eth0 tap={redirect.NIC_TAP} speed_bps={self.host_bps} "
                        f"dscp_tc={DSCP_TC}")
            run_in(_ns(host), ["tc", "-batch", "-"],
                   "".join(line + "\n" for line in redirect.nic_redirects("eth0")))
        for host in self.hosts[:-1]:  # neighbours resolved before any burst
            run_in(_ns(host), ["ping", "-c1", "-W2", self.address(len(self.hosts) - 1)])

    def destroy(self) -> None:
        remove([self.switch, *self.hosts])

    def send(self, sender: int, to: int, count: int, size: int = 1000) -> None:
        """`count` lossless datagrams from host `sender` to host `to`, and wait till sent."""
        run_in(_ns(self.hosts[sender]), [sys.executable, "-c", SEND, self.address(sender),
                                         self.address(to), str(PORT), str(count), str(size),
                                         str(LOSSLESS_DSCP << 2)])

    def burst(self, count: int, size: int = 1400, idle_s: float = 2.0) -> Result:
        """Every sender sends `count` datagrams of `size` bytes at once."""
        receiver = len(self.hosts) - 1
        rx = subprocess.Popen(["ip", "netns", "exec", self.hosts[receiver], sys.executable, "-c",
                               RECEIVE, str(PORT), str(idle_s)], stdout=subprocess.PIPE,
                              text=True)
        pauses: dict[str, int] = {}
        stop = threading.Event()
        watchers = [threading.Thread(target=_count_pauses, args=(_ns(h), pauses, f"h{i}", stop))
                    for i, h in enumerate(self.hosts[:-1])]
        try:
            if rx.stdout is None or rx.stdout.readline().strip() != "ready":
                raise RuntimeError("incast receiver did not start")
            for w in watchers:
                w.start()
            wait_until(lambda: len(pauses) == len(watchers), 5.0, every=0.01)
            tos = LOSSLESS_DSCP << 2 | ECT0
            senders = [subprocess.Popen(["ip", "netns", "exec", h, sys.executable, "-c", SEND,
                                         self.address(i), self.address(receiver), str(PORT),
                                         str(count), str(size), str(tos)])
                       for i, h in enumerate(self.hosts[:-1])]
            for s in senders:
                s.wait(timeout=120)
            out = json.loads(rx.communicate(timeout=180)[0])
        finally:
            stop.set()
            for w in watchers:
                if w.is_alive():
                    w.join()
            rx.kill()
            rx.wait()
        return Result(count, out["received"], out["ce"], out["seconds"], pauses,
                      self.engines["switch"].counters(),
                      {name: e.counters() for name, e in self.engines.items() if name != "switch"},
                      [self.address(i) for i in range(self.n)])


def _count_pauses(netns_path: str, into: dict[str, int], key: str, stop: threading.Event) -> None:
    """PAUSE frames (EtherType 0x8808) arriving on the host's port, until `stop`."""
    from harness.linux.nsenter import call_in_netns

    def open_socket() -> object:
        import socket
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x8808))
        sock.bind(("eth0", 0x8808))
        sock.settimeout(0.1)
        return sock

    sock = call_in_netns(netns_path, open_socket)
    into[key] = 0
    try:
        while not stop.is_set():
            try:
                sock.recv(128)  # type: ignore[attr-defined]
                into[key] += 1
            except TimeoutError:
                continue
    finally:
        sock.close()  # type: ignore[attr-defined]


@contextmanager
def incast(directory: Path, senders: int, host_bps: int, port_bps: int,
           buffers: Buffers = Buffers(), pfc: bool = True) -> Iterator[Incast]:
    fabric = Incast(directory, senders, host_bps, port_bps, buffers, pfc)
    try:
        fabric.build()
        yield fabric
    finally:
        fabric.destroy()
