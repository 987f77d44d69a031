"""Measure what a link really does: RTT samples and loss from ping, percentiles of them.

Used by the impairment tests and bench/impair.py, so both judge the same numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.errors import LabError
from harness.nodes.node import Node
from harness.stats import percentile

_TIME = re.compile(r"time=([0-9.]+) ms")
_SENT = re.compile(r"(\d+) packets transmitted, (\d+) received")


@dataclass(frozen=True)
class PingResult:
    rtts_us: list[float]
    sent: int
    received: int

    @property
    def loss_pct(self) -> float:
        return 100.0 * (self.sent - self.received) / self.sent

    def percentile(self, q: float) -> float:
        return percentile(self.rtts_us, q)


def ping(node: Node, address: str, count: int, interval_s: float = 0.002,
         size: int = 56) -> PingResult:
    """`count` echo requests from `node`, one every `interval_s`, each waited for up to 2 s."""
    out = node.cmd("ping", "-n", "-c", str(count), "-i", f"{interval_s:g}", "-s", str(size),
                   "-W", "2", address, timeout=count * interval_s + 30)
    totals = _SENT.search(out.stdout)
    if not totals:
        raise LabError(f"{node.name}: ping {address} gave no summary: {out.stderr.strip()}")
    return PingResult([float(t) * 1000 for t in _TIME.findall(out.stdout)],
                      int(totals[1]), int(totals[2]))
