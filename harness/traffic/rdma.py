"""RDMA runs between hosts, perftest-style: one fl-rdma engine per host taking part, every
engine starting at one instant, and per QP what its two ends counted.

A run is a set of (source, destination) pairs: one pair is ib_write_bw, many sources to one
destination an incast, every ordered pair of a group all-to-all. Each host's engine sends to
its destinations and answers its sources; `Run` pairs each requester with the responder of
the same QP and prints perftest's columns (bytes, iterations, peak and average Gbit/s,
message rate) with the transport's counters beside them.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.core.errors import LabError
from harness.nodes.rdma.engine import (
    ENGINE,
    Nic,
    Report,
    Requester,
    Responder,
    Settings,
    argv,
    report,
)
from harness.spray.nic import nic_planes, sprays
from harness.spray.ruleset import plane_mark
from harness.traffic.flow import Action, run_actions

if TYPE_CHECKING:
    from harness.runtime.context import LabContext

START_AFTER_S = 0.5  # every engine bound and waiting before the first packet
Popen = Callable[..., subprocess.Popen]  # (host, argv, **Popen's keywords) -> the process
PERFTEST = ("#bytes", "#iterations", "BW peak[Gb/sec]", "BW average[Gb/sec]", "MsgRate[Mpps]")
# Below this share of a window's line time the host left a NIC, the window has too little
# to judge a rate by: a VM paused that long, or a run queue held the engine as long.
MIN_LINE_SHARE = 0.5


@dataclass
class Flow:
    src: str
    dst: str
    requester: Requester
    responder: Responder

    def goodput_bps(self) -> float:
        return self.requester.bytes * 8 / self.requester.seconds


@dataclass
class Run:
    settings: Settings
    reports: dict[str, Report]
    flows: list[Flow]

    @property
    def bin_s(self) -> float:
        return self.settings.bin_ms / 1000

    def seconds(self) -> float:
        """From the first packet any QP sent to the last completion."""
        first = min(f.requester.first_ns for f in self.flows)
        last = max(f.requester.done_ns for f in self.flows)
        return max(last - first, 1) / 1e9

    def goodput_bps(self) -> float:
        """All flows' acknowledged bytes over the run's seconds."""
        return sum(f.requester.bytes for f in self.flows) * 8 / self.seconds()

    def peak_bps(self) -> float:
        width = max(len(f.requester.timeline) for f in self.flows)
        bins = [sum(f.requester.timeline[i] for f in self.flows if i < len(f.requester.timeline))
                for i in range(width)]
        return max(bins, default=0) * 8 / self.bin_s

    def rates_bps(self, flow: Flow, window: int, completed: bool = False) -> list[float]:
        """The flow's rate over `window` bins from each bin on, in bit/s: what its responder
        placed (in any order, as the fabric delivered it), or with `completed` what its
        requester saw acknowledged in order (what the application sees complete)."""
        bins = flow.requester.timeline if completed else flow.responder.timeline
        return [sum(bins[i:i + window]) * 8 / (window * self.bin_s)
                for i in range(max(len(bins) - window + 1, 0))]

    def line_shares(self, flow: Flow, window: int, completed: bool = False) -> list[float]:
        """Of `window` bins from each bin on (as `rates_bps` has them), the share of line
        time the flow's requester had: the time its engine was not held by the host past
        something due. A NIC is never late; its emulation is whenever the scheduler or the
        hypervisor is."""
        held = self.reports[flow.src].held
        bins = len(flow.requester.timeline if completed else flow.responder.timeline)
        return [1 - sum(held[i:i + window]) / (window * self.bin_s * 1e9)
                for i in range(max(bins - window + 1, 0))]

    def line_rates_bps(self, flow: Flow, window: int, completed: bool = False
                       ) -> list[float | None]:
        """`rates_bps` per second of line time the requester had, which is what the fabric
        and the transport made of it; None where the host left it under MIN_LINE_SHARE."""
        return [rate / share if share >= MIN_LINE_SHARE else None
                for rate, share in zip(self.rates_bps(flow, window, completed),
                                       self.line_shares(flow, window, completed), strict=True)]

    @property
    def senders(self) -> list[str]:
        """The hosts whose requesters took part, each once, in the flows' order."""
        return list(dict.fromkeys(f.src for f in self.flows))

    def held_s(self, host: str) -> float:
        """Seconds, from the first packet to the last completion, the host held the engine
        of `host` past something due."""
        report = self.reports[host]
        lo, hi = ((t - report.start_ns) // report.bin_ns for t in (
            min(f.requester.first_ns for f in self.flows),
            max(f.requester.done_ns for f in self.flows)))
        return sum(report.held[max(lo, 0):hi + 1]) / 1e9

    def line_goodput_bps(self) -> float:
        """`goodput_bps` per second of line time the requesters had: the host's holds taken
        out, so two runs compare by what the transport did, not by the box's other load."""
        return sum(sum(f.requester.bytes for f in self.flows if f.src == host) * 8
                   / (self.seconds() - self.held_s(host))
                   for host in self.senders)

    def converged_s(self, window: int, tolerance: float = 0.1) -> float | None:
        """Seconds from the start until every flow's rate over the next `window` bins is
        within `tolerance` of their mean (the fair share of what got through); None if
        that never happened."""
        rates = [self.rates_bps(f, window) for f in self.flows]
        for i in range(min(map(len, rates), default=0)):
            share = sum(r[i] for r in rates) / len(rates)
            if share and all(abs(r[i] - share) <= tolerance * share for r in rates):
                return i * self.bin_s
        return None

    def base_rtt_ns(self) -> int:
        """The least RTT any QP measured: the fabric's unloaded round trip."""
        return min((f.requester.min_rtt_ns for f in self.flows if f.requester.min_rtt_ns),
                   default=0)

    def total(self, counter: str) -> int:
        """A requester's or responder's counter summed over every QP."""
        side = "requester" if hasattr(self.flows[0].requester, counter) else "responder"
        return sum(getattr(getattr(f, side), counter) for f in self.flows)

    @property
    def pause_ns(self) -> int:
        return sum(r.pause_ns for r in self.reports.values())

    def perftest(self) -> dict[str, float]:
        messages = self.total("messages")
        return dict(zip(PERFTEST, (self.settings.size, messages, self.peak_bps() / 1e9,
                                   self.goodput_bps() / 1e9, messages / self.seconds() / 1e6),
                        strict=True))

    def counters(self) -> dict[str, int]:
        return {"sent": self.total("sent"), "retransmitted": self.total("retransmitted"),
                "duplicates": self.total("duplicates"), "out_of_order": self.total("out_of_order"),
                "timeouts": self.total("timeouts"), "naks": self.total("naks"),
                "ce": self.total("ce"), "cnps": self.total("cnps"),
                "ecn_echoes": self.total("ecn_echoes"), "pause_us": self.pause_ns // 1000,
                "errors": sum(f.requester.error for f in self.flows)}

    def to_dict(self) -> dict[str, object]:
        return {"transport": self.settings.transport, "perftest": self.perftest(),
                "counters": self.counters(),
                "held_ms": {host: round(self.held_s(host) * 1e3, 3) for host in self.senders},
                "line_goodput_bps": round(self.line_goodput_bps()),
                "flows": [{"src": f.src, "dst": f.dst, "qpn": f.requester.qpn,
                           "goodput_bps": round(f.goodput_bps()),
                           "retransmitted": f.requester.retransmitted,
                           "error": f.requester.error} for f in self.flows]}


def run(popen: Popen, program: str, nics: dict[str, Nic], pairs: list[tuple[str, str]],
        settings: Settings, actions: Sequence[Action] = ()) -> Run:
    """Every host of `pairs` runs one engine (started by `popen` on it); the pairs' flows.
    `actions` run at their times after the common start (a fault mid-transfer)."""
    hosts = list(dict.fromkeys(h for pair in pairs for h in pair))
    dsts = {h: [d for s, d in pairs if s == h] for h in hosts}
    start = time.monotonic_ns() + int(START_AFTER_S * 1e9)
    procs = {h: popen(h, argv(program, nics[h], [nics[d] for d in dsts[h]], settings, start),
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for h in hosts}
    player = threading.Thread(target=run_actions, args=(actions, start), daemon=True)
    player.start()
    outputs: dict[str, tuple[str, str]] = {}
    try:
        for h, proc in procs.items():
            outputs[h] = proc.communicate(timeout=settings.deadline_ms / 1000 + 30)
        player.join()
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for h, proc in procs.items():
        if proc.returncode:
            raise LabError(f"{h}: fl-rdma failed: {outputs[h][1].strip()[-300:]}")
    reports = {h: report(outputs[h][0], h) for h in hosts}
    flows = []
    for h in hosts:
        for req in reports[h].requesters:
            dst = next(d for d in dsts[h] if req.peer in nics[d].reach)
            rsp = next((r for r in reports[dst].responders if r.qpn == req.qpn), None)
            if rsp is None:
                raise LabError(f"{h} -> {dst}: QP {req.qpn} never reached the responder")
            flows.append(Flow(h, dst, req, rsp))
    return Run(settings, reports, flows)


def spraying_nic(host_id: int, loopback: str, plane_ifaces: dict[int, str]) -> Nic:
    """A multi-plane host (FPF): one routed loopback, each plane steered by its fwmark, as the
    host's spray rules already honour for probes (harness/spray/ruleset.py)."""
    planes = sorted(plane_ifaces)
    return Nic(host_id, tuple(loopback for _ in planes), tuple(plane_ifaces[p] for p in planes),
               tuple(plane_mark(p) for p in planes), (loopback,))


def lab_nic(lab: LabContext, name: str, host_id: int) -> Nic:
    """A lab host as the engine sees it: every plane NIC of a spraying host, else its one
    link, sending from its loopback (what the fabric routes) or that link's address."""
    plan = lab.plan
    node = plan.node(name)
    if sprays(plan, node):
        if not node.loopback4:
            raise LabError(f"{name}: a multi-plane host needs an IPv4 loopback to send from")
        return spraying_nic(host_id, node.loopback4,
                            {p: iface for iface, p in nic_planes(plan, node).items()})
    iface = next((i for i in node.interfaces if i.ipv4), None)
    address = node.loopback4 or (iface.ipv4.split("/")[0] if iface and iface.ipv4 else None)
    if iface is None or address is None:
        raise LabError(f"{name} has no IPv4 address to send RDMA traffic from")
    return Nic(host_id, (address,), (iface.name,), (0,), (address,))


def lab_rate_bps(lab: LabContext, hosts: list[str]) -> int | None:
    """The slowest line rate the topology gives the hosts' links, if it gives any."""
    rates = [i.bandwidth_bps for h in hosts for i in lab.plan.node(h).interfaces
             if i.bandwidth_bps]
    return min(rates) if rates else None


def hosts_of(lab: LabContext, pairs: list[tuple[str, str]]) -> list[str]:
    """The hosts of `pairs`, each one of the lab's nodes (or an error naming its hosts)."""
    hosts = list(dict.fromkeys(h for pair in pairs for h in pair))
    for h in hosts:
        if h not in lab.node_names:
            raise LabError(f"no node {h!r} in lab {lab.plan.name}; its hosts: "
                           + ", ".join(n.name for n in lab.plan.nodes if n.kind == "host"))
    return hosts


def rdma(lab: LabContext, pairs: list[tuple[str, str]], settings: Settings,
         actions: Sequence[Action] = ()) -> Run:
    """The run between lab hosts (each engine runs inside its node)."""
    hosts = hosts_of(lab, pairs)
    nics = {h: lab_nic(lab, h, i + 1) for i, h in enumerate(hosts)}
    return run(lambda node, argv, **kw: lab.node(node).popen(argv, **kw),
               lab.runtime.program(ENGINE), nics, pairs, settings, actions)
