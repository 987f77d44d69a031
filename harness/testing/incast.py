"""An N:1 incast through one switch whose ports are fl-port engines, in scratch namespaces.

N senders, each on its own switch port, send a burst of RoCE-marked datagrams (DSCP 26,
ECT(0)) at once to one receiver; the switch's port to the receiver drains at its line rate,
so its lossless queue fills. The switch's engine runs as a SAI switch programs it (shared
pool, a lossless priority group per ingress port with its headroom, WRED on the egress
queue); each sender's NIC engine honours PAUSE. The receiver counts distinct datagrams per
sender and CE marks from each packet's TOS byte; tcpdump on every sender's port counts the
PAUSE frames that reach it on the wire (harness/traffic/incast.py). Used by the e2e tests and
bench/congestion.py.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from harness.core.build import built
from harness.links.impair.userspace import start_scratch
from harness.linux.nsenter import NETNS_RUN_DIR, run_in
from harness.linux.scratch import remove, scratch_name
from harness.nodes.port import redirect
from harness.nodes.port.engine import ENGINE, Counters, PortEngine, class_maps
from harness.nodes.rdma.engine import ENGINE as RDMA_ENGINE
from harness.nodes.rdma.engine import Nic, Settings
from harness.nodes.switch.sai.headroom import pause_window_ns
from harness.topology.fibre import FIBRE_US_PER_KM
from harness.topology.plan import Impairment
from harness.traffic.burst import SEND
from harness.traffic.incast import ECT0, Burst, Host, run
from harness.traffic.rdma import Run
from harness.traffic.rdma import run as run_rdma

LOSSLESS_DSCP = 26
LOSSLESS_TC = 3
PORT = 4791
MAPS = class_maps({LOSSLESS_DSCP: LOSSLESS_TC}, {})

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
class Result(Burst):
    switch: Counters
    nics: dict[str, Counters]
    victim: Burst | None  # the first sender's flow to the victim, when there is one

    def victim_rate(self, wire_bytes: int) -> float:
        """What the victim's flow got through, in bit/s on the wire."""
        assert self.victim is not None
        got = sum(self.victim.received.values())
        return got * wire_bytes * 8 / self.victim.seconds if self.victim.seconds else 0.0


FABRICS = itertools.count()


def _ns(name: str) -> str:
    return f"{NETNS_RUN_DIR}/{name}"


class Incast:
    """The scratch fabric: `senders` hosts and a receiver on one switch, and with `victim`
    one more host, which only the first sender sends to (congestion spreading)."""

    def __init__(self, directory: Path, senders: int, host_bps: int, port_bps: int,
                 buffers: Buffers, pfc: bool = True, victim: bool = False,
                 nic_engines: bool = True) -> None:
        self.dir, self.n, self.host_bps, self.port_bps = directory, senders, host_bps, port_bps
        self.buffers, self.pfc, self.nic_engines = buffers, pfc, nic_engines
        tag = next(FABRICS)  # fabrics alive at once get names of their own
        self.switch = scratch_name(f"i{tag}sw")
        # senders, the receiver (index `senders`), then the victim's receiver
        self.hosts = [scratch_name(f"i{tag}h{i}") for i in range(senders + 1 + victim)]
        self.engines: dict[str, PortEngine] = {}
        self.impairs: list[subprocess.Popen] = []

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
            speed = self.port_bps if i == self.n else self.host_bps  # the receiver's: slow
            sw.command(f"port {i} name={name} tap={redirect.tap_of(i)} "
                       f"speed_bps={speed} {MAPS} pfc={1 << LOSSLESS_TC if self.pfc else 0} "
                       f"pause_window_ns={pause_window_ns(0)}")
            sw.command(f"pg {i} {LOSSLESS_TC} reserved=0 xoff={b.headroom} "
                       f"xon_offset={b.xon_offset} static_th={b.shared}")
            sw.command(f"queue {i} {LOSSLESS_TC} static_th={b.queue_limit}"
                       + (f" wred=1 min={b.wred[0]} max={b.wred[1]} prob={b.wred[2]} ecn=1"
                          if b.wred else ""))
        sw.command(f"cpu tap={redirect.CPU_TAP}")
        run_in(_ns(self.switch), ["nft", "-f", "-"], redirect.marks_ruleset(ports))
        run_in(_ns(self.switch), ["tc", "-batch", "-"], redirect.batch(
            [c for name in ports for c in redirect.switch_redirects(name, list(ports.values()))]))
        for i, host in enumerate(self.hosts[:self.n] if self.nic_engines else []):
            nic = self.engines[f"h{i}"] = PortEngine(self.dir, f"h{i}")
            nic.start([program, "run", "nic", str(nic.control)], _ns(host))
            tap = redirect.nic_tap(0)
            nic.command(f"port 0 name=eth0 tap={tap} speed_bps={self.host_bps} "
                        f"{MAPS}")
            run_in(_ns(host), ["tc", "-batch", "-"],
                   redirect.batch(redirect.nic_redirects("eth0", tap)))
        for host in self.hosts[:self.n]:  # neighbours resolved before any burst
            for far in range(self.n, len(self.hosts)):
                run_in(_ns(host), ["ping", "-c1", "-W2", self.address(far)])

    def cable(self, host: int, km: float) -> None:
        """Host `host`'s link becomes `km` of fibre: the impairment engine delays each way,
        after the port engines (their frames and PAUSE pass it, harness/nodes/port)."""
        delay = Impairment(delay_us=km * FIBRE_US_PER_KM)
        self.engines["switch"].command(
            f"port {host} pause_window_ns={pause_window_ns(delay.delay_us)}")
        for ns, iface in ((self.hosts[host], "eth0"), (self.switch, f"p{host}")):
            self.impairs.append(start_scratch(_ns(ns), iface, f"flc{host}{iface[0]}",
                                              self.dir / f"cable.{iface}.sock", delay))

    def destroy(self) -> None:
        remove([self.switch, *self.hosts])

    def send(self, sender: int, to: int, count: int, size: int = 1000) -> None:
        """`count` lossless datagrams from host `sender` to host `to`, and wait till sent."""
        run_in(_ns(self.hosts[sender]), [sys.executable, "-c", SEND, self.address(sender),
                                         self.address(to), str(PORT), str(count), str(size),
                                         str(LOSSLESS_DSCP << 2), "0"])

    def burst(self, count: int, size: int = 1400, idle_s: float = 2.0, pps: float = 0) -> Result:
        """Every sender sends `count` datagrams of `size` bytes at once (at `pps` each, or as
        fast as it can); with a victim, the first sender also sends it as many, interleaved
        with its share of the incast."""
        def popen(ns: str, argv: list[str], **kw: object) -> subprocess.Popen:
            return subprocess.Popen(["ip", "netns", "exec", ns, *argv], **kw)  # type: ignore

        hosts = [Host(h, "eth0", self.address(i)) for i, h in enumerate(self.hosts)]
        done, victim = run(popen, hosts[:self.n], hosts[self.n], count, size,
                           LOSSLESS_DSCP << 2 | ECT0, idle_s,
                           hosts[-1] if len(hosts) > self.n + 1 else None, pps)
        pauses = {f"h{i}": done.pauses_on_wire[h.node] for i, h in enumerate(hosts[:self.n])}
        return Result(**{**vars(done), "pauses_on_wire": pauses},
                      switch=self.engines["switch"].counters(),
                      nics={n: e.counters() for n, e in self.engines.items() if n != "switch"},
                      victim=victim)


    def rdma(self, settings: Settings) -> Run:
        """Every sender writes to the receiver over fl-rdma, whose NIC paces at the host's
        line rate and honours PAUSE itself (build the fabric without NIC engines)."""
        nics = {h: Nic(i + 1, (self.address(i),), ("eth0",), (0,), (self.address(i),))
                for i, h in enumerate(self.hosts)}

        def popen(host: str, argv: list[str], **kw: object) -> subprocess.Popen:
            return subprocess.Popen(["nsenter", f"--net={_ns(host)}", *argv],
                                    **kw)  # type: ignore[call-overload]
        receiver = self.hosts[self.n]
        return run_rdma(popen, str(built(RDMA_ENGINE)), nics,
                        [(h, receiver) for h in self.hosts[:self.n]],
                        replace(settings, rate_bps=self.host_bps, dscp=LOSSLESS_DSCP,
                                prio=LOSSLESS_TC))


@contextmanager
def incast(directory: Path, senders: int, host_bps: int, port_bps: int,
           buffers: Buffers = Buffers(), pfc: bool = True, victim: bool = False,
           nic_engines: bool = True) -> Iterator[Incast]:
    """The fabric; without `nic_engines` the hosts' own transport (fl-rdma) is their MAC."""
    fabric = Incast(directory, senders, host_bps, port_bps, buffers, pfc, victim, nic_engines)
    try:
        fabric.build()
        yield fabric
    finally:
        fabric.destroy()
