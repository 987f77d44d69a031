"""What a flow measured (pure): from send times and arrivals to loss, order, latency, outage.

The outage window is the span from the first lost packet's send time to the last one's, plus
one packet interval (so a single lost packet is a one-interval outage): with per-packet
spraying only the packets sprayed onto a dead plane are lost, so this is the time the fault
took to be routed around, i.e. its convergence time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.core.stats import percentile

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class FlowResult:
    src: str
    dst: str
    sent: int
    received: int
    lost: int
    duplicates: int
    reordered: int
    latency_us: dict[str, float]
    per_nic: dict[str, int]
    per_plane: dict[int, int]
    per_plane_after_outage: dict[int, int]  # packets sent after the last loss, by plane
    outage_ms: float
    first_loss_s: float | None  # seconds after the flow started
    last_loss_s: float | None
    rate_pps: float
    start_ns: int  # CLOCK_MONOTONIC of the first send: lines the flow up with faults
    duration_s: float
    marks: dict[str, float] = field(default_factory=dict)  # event -> seconds after start

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def covers(self, monotonic_ns: int) -> bool:
        """Did this flow run at that instant?"""
        return self.start_ns <= monotonic_ns <= self.start_ns + self.duration_s * 1e9


def analyse(src: str, dst: str, send_ns: Sequence[int], arrivals: Mapping[str, Sequence[Any]],
            plane_of_nic: Mapping[str, int], rate_pps: float,
            marks_ns: Mapping[str, int] | None = None) -> FlowResult:
    """`send_ns[seq]` from the sender; `arrivals` holds parallel lists seq, sent_ns, recv_ns,
    nic in arrival order (the receiver's file)."""
    seen: set[int] = set()
    duplicates = reordered = 0
    highest = -1
    latencies = []
    per_nic: Counter[str] = Counter()
    nic_of_seq: dict[int, str] = {}
    for seq, sent, recv, nic in zip(arrivals["seq"], arrivals["sent_ns"], arrivals["recv_ns"],
                                    arrivals["nic"], strict=True):
        if seq in seen:
            duplicates += 1
            continue
        seen.add(seq)
        if seq < highest:
            reordered += 1
        highest = max(highest, seq)
        latencies.append((recv - sent) / 1000)
        per_nic[nic] += 1
        nic_of_seq[seq] = nic
    latencies.sort()
    lost = [seq for seq in range(len(send_ns)) if seq not in seen]
    start = send_ns[0] if send_ns else 0
    interval_ms = 1000 / rate_pps
    outage = ((send_ns[lost[-1]] - send_ns[lost[0]]) / 1e6 + interval_ms) if lost else 0.0
    after = Counter(nic for seq, nic in nic_of_seq.items() if lost and seq > lost[-1])
    return FlowResult(
        src=src, dst=dst, sent=len(send_ns), received=len(seen), lost=len(lost),
        duplicates=duplicates, reordered=reordered,
        latency_us={**{f"p{p}": percentile(latencies, p) if latencies else 0.0
                       for p in PERCENTILES}, "max": latencies[-1] if latencies else 0.0},
        per_nic=dict(sorted(per_nic.items())), per_plane=_by_plane(per_nic, plane_of_nic),
        per_plane_after_outage=_by_plane(after, plane_of_nic),
        outage_ms=round(outage, 3),
        first_loss_s=(send_ns[lost[0]] - start) / 1e9 if lost else None,
        last_loss_s=(send_ns[lost[-1]] - start) / 1e9 if lost else None,
        rate_pps=rate_pps, start_ns=start,
        duration_s=(send_ns[-1] - start) / 1e9 if send_ns else 0.0,
        marks={name: (t - start) / 1e9 for name, t in (marks_ns or {}).items()})


def _by_plane(per_nic: Mapping[str, int], plane_of_nic: Mapping[str, int]) -> dict[int, int]:
    planes: Counter[int] = Counter()
    for nic, count in per_nic.items():
        if nic in plane_of_nic:
            planes[plane_of_nic[nic]] += count
    return dict(sorted(planes.items()))
