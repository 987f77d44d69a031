"""The transport measurements the e2e tests assert and bench/transport.py prints: one
setting each, so a test and the bench measure the same thing.

- loss: a transfer over two planes whose links drop `loss_pct` of the data (fl-impair
  counts the drops), from which goodput and resent/lost come;
- incast: N senders into one switch port through fl-port (ECN from WRED; PFC for roce),
  with the switch's counters for the congested queue and the PAUSE it sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.nodes.rdma.engine import Settings
from harness.testing.incast import LOSSLESS_TC, Buffers, incast
from harness.testing.multipath import planes
from harness.topology.plan import Impairment
from harness.traffic.rdma import Run

NIC_BPS = 50_000_000
DELAY_US = 2000  # each plane's one-way delay: a BDP of tens of packets, which go-back-N resends
RUN_MS = 2000
INCAST_BUFFERS = Buffers(shared=8000, headroom=12000)  # a group's share: 8 x 8 kB queued at most


def loss(directory: Path, transport: str, loss_pct: float) -> tuple[Run, int]:
    """The run, and the packets the links dropped."""
    with planes(directory, [Impairment(delay_us=DELAY_US, loss_pct=loss_pct)] * 2) as fabric:
        run = fabric.rdma(Settings(transport=transport, iterations=0, duration_ms=RUN_MS, qps=2,
                                   paths=4, rate_bps=NIC_BPS))
        return run, fabric.lost()


@dataclass
class Incast:
    run: Run
    queue: dict[str, int]  # the congested queue's SAI counters
    pauses: int  # PAUSE frames the switch sent the senders

    @property
    def dropped(self) -> int:
        return self.queue["SAI_QUEUE_STAT_DROPPED_PACKETS"]

    @property
    def marked(self) -> int:
        return self.queue["SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS"]

    @property
    def peak_bytes(self) -> int:
        return self.queue["SAI_QUEUE_STAT_WATERMARK_BYTES"]


def incast_run(directory: Path, transport: str, senders: int = 8, duration_ms: int = 3000
               ) -> Incast:
    """`senders` hosts write to one at the same line rate as its port; PFC only for roce."""
    with incast(directory, senders, NIC_BPS, NIC_BPS, INCAST_BUFFERS, pfc=transport == "roce",
                nic_engines=False) as fabric:
        run = fabric.rdma(Settings(transport=transport, iterations=0, duration_ms=duration_ms,
                                   paths=4))
        counters = fabric.engines["switch"].counters()
    return Incast(run, counters.port(f"p{senders}").queues[LOSSLESS_TC].stats,
                  sum(counters.port(f"p{i}").groups[LOSSLESS_TC].pfc_tx for i in range(senders)))
