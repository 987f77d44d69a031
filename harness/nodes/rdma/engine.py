"""fl-rdma (fl_rdma.c): its settings, the command line of one host's engine, and its report.

A run starts one engine per host taking part; each sends to its peers and answers whoever
sends to it, from one common start time, and prints one JSON report when it is done. The
settings name every knob of both transports with the defaults NICs and the published
descriptions use; `Report` is that JSON as typed records.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields

from harness.core.errors import LabError

ENGINE = "fl-rdma"
TRANSPORTS = ("roce", "metaroce")
RC_ACK_TIMEOUT_US = 67_109  # an RC QP's local ACK timeout 14: 4.096 us x 2^14


@dataclass(frozen=True)
class Dcqcn:
    """DCQCN's reaction point as published (Zhu et al., SIGCOMM 2015) at ref_bps. The engine
    runs it slowed by ref_bps / the NIC's rate: times stretch and rate steps shrink by that
    factor, so the dynamics in packets are the paper's."""

    g: float = 1 / 256  # alpha's gain
    alpha_us: float = 55.0  # alpha decays every K without a CNP
    timer_us: float = 55.0  # rate-increase timer T
    byte_reset: int = 10 * 1024 * 1024  # rate-increase byte counter B
    fast_stages: int = 5  # F: fast-recovery stages before additive increase
    ai_bps: float = 40e6  # R_AI
    hai_bps: float = 400e6  # R_HAI (hyper increase)
    min_bps: float = 10e6  # the rate never falls below
    ref_bps: float = 40e9  # the rate these figures are for
    cnp_interval_us: int = 50  # the notification point's one CNP per QP per interval


@dataclass(frozen=True)
class Settings:
    """One run's transport and workload, as perftest would take them."""

    transport: str = "metaroce"
    size: int = 65536  # bytes per message (one RDMA write)
    iterations: int = 100  # messages per QP; 0 with duration_ms: as many as fit
    duration_ms: int = 0
    qps: int = 1  # QPs (connections) per peer
    paths: int = 8  # metaroce: paths (UDP source ports) per connection
    mtu: int = 1024  # RoCE path MTU: payload bytes per packet
    rate_bps: int = 100_000_000  # each plane NIC's line rate
    dscp: int = 26  # the lossless class's DSCP (RoCE's customary 26)
    prio: int = 3  # its priority: the PAUSE class the NIC honours
    cnp_dscp: int = 48  # CNPs' DSCP, as NICs send them
    timeout_us: int = RC_ACK_TIMEOUT_US  # roce: the ACK timeout
    retry: int = 7  # roce: timeouts in a row before the QP fails
    ack_every: int = 8  # ask for an ACK every N packets (and on a message's last)
    rto_min_us: int = 5_000  # metaroce: a path's least timeout
    rto_init_us: int = 100_000  # metaroce: a path's timeout before its first RTT sample
    dupthresh: int = 3  # metaroce: later packets acknowledged before one counts as lost
    dead_after: int = 3  # metaroce: timeouts in a row that abandon a path
    probe_ms: int = 50  # metaroce: how often an abandoned path is tried again
    beta: float = 0.5  # metaroce: window cut on an ECN echo (at most once per RTT)
    hint: bool = True  # metaroce: obey the responder's fair-share hint
    bin_ms: int = 10  # timeline resolution
    idle_ms: int = 300  # an engine ends this long after its last packet
    deadline_ms: int = 60_000
    dcqcn: Dcqcn = field(default_factory=Dcqcn)

    def __post_init__(self) -> None:
        if self.transport not in TRANSPORTS:
            raise LabError(f"transport {self.transport!r}: use one of {', '.join(TRANSPORTS)}")
        if self.size <= 0 or self.mtu < 64 or self.rate_bps <= 0:
            raise LabError("size and rate must be positive and the MTU at least 64 bytes")
        if not (self.iterations or self.duration_ms):
            raise LabError("give iterations or a duration")
        if not 1 <= self.paths <= 64 or not 1 <= self.qps <= 64:
            raise LabError("paths and qps are 1..64")

    def args(self) -> list[str]:
        out = [f"transport={self.transport}"]
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("transport", "dcqcn"):
                continue
            out.append(f"{f.name}={int(value) if isinstance(value, bool) else value}")
        out += [f"{k}={v}" for k, v in asdict(self.dcqcn).items()]
        return out


@dataclass(frozen=True)
class Nic:
    """Where a host's engine sends from, per plane: the source address, the NIC (whose PAUSE
    it honours) and the fwmark that steers a packet to that plane (0: its routes decide);
    `reach` is what peers send to (a plane's own address each, or one routed loopback)."""

    host_id: int
    addresses: tuple[str, ...]
    ifaces: tuple[str, ...]
    marks: tuple[int, ...]
    reach: tuple[str, ...]


def argv(program: str, nic: Nic, peers: list[Nic], settings: Settings, start_ns: int
         ) -> list[str]:
    out = [program, f"id={nic.host_id}", f"local={','.join(nic.addresses)}",
           f"ifaces={','.join(nic.ifaces)}", f"marks={','.join(map(str, nic.marks))}",
           f"start_ns={start_ns}", *settings.args()]
    if peers:
        out.append("peers=" + ",".join("/".join(p.reach) for p in peers))
    return out


@dataclass
class Path:
    plane: int
    sport: int
    sent: int
    retransmitted: int
    timeouts: int
    ecn_echoes: int
    dead: bool
    abandoned_ns: int  # when it was first given up (0: never)
    abandon_timeouts: int  # its timeouts in a row then
    srtt_ns: int
    cwnd: float


@dataclass
class Requester:
    """One QP's sending side: what it sent, resent and got acknowledged."""

    qpn: int
    peer: str
    bytes: int  # acknowledged, in whole-packet order
    messages: int
    first_ns: int
    done_ns: int
    sent: int
    retransmitted: int
    naks: int
    timeouts: int
    cnps: int
    ecn_echoes: int
    error: bool
    rate_bps: float
    min_rtt_ns: int
    paths: list[Path]
    timeline: list[int]  # bytes acknowledged per bin

    @property
    def seconds(self) -> float:
        return max(self.done_ns - self.first_ns, 1) / 1e9


@dataclass
class Responder:
    """One QP's receiving side: what arrived, twice, out of order or marked."""

    qpn: int
    source: str
    packets: int
    bytes: int
    messages: int
    duplicates: int  # packets placed already: resends whose first copy had arrived
    out_of_order: int
    ce: int
    cnps: int
    naks: int
    first_ns: int
    last_ns: int
    timeline: list[int]  # bytes placed per bin


@dataclass
class Report:
    id: int
    transport: str
    start_ns: int
    bin_ns: int
    pause_ns: int
    pause_frames: int
    requesters: list[Requester]
    held: list[int]  # ns per bin the host held the engine past something due
    responders: list[Responder]


def report(text: str, where: str) -> Report:
    """The engine's last line: its JSON report (the first line says it is ready)."""
    lines = [line for line in text.splitlines() if line.strip()]
    try:
        data = json.loads(lines[-1])
        return Report(**{**data,
                         "requesters": [Requester(**{**r, "paths": [Path(**p) for p in r["paths"]]})
                                        for r in data["requesters"]],
                         "responders": [Responder(**r) for r in data["responders"]]})
    except (IndexError, ValueError, KeyError, TypeError) as exc:
        raise LabError(f"{where}: fl-rdma gave no report ({exc}): {text[-300:]!r}") from None
