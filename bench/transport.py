"""RDMA transports (fl-rdma), every figure from one run: a loss sweep for both transports,
resent against lost, paths ten times apart in delay, an 8:1 incast side by side (RoCEv2 with
DCQCN over PFC, MetaRoCE-style without PFC), a gray-failed plane, and one engine's speed.

Losses are the links' (fl-impair counts them), drops and marks the switch's (fl-port), and
each is printed beside the transport's own count. Goodput is printed absolute and against
the loss-free run of the same transport measured here, so it means the same at any rate.

    sudo .venv/bin/python bench/transport.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from harness.nodes.rdma.engine import Settings
from harness.testing.multipath import SENDER, planes
from harness.testing.transport import DELAY_US, NIC_BPS, incast_run, loss
from harness.topology.plan import Impairment

LOSSES = (0.0, 0.1, 1.0, 5.0)
TRANSPORTS = ("metaroce", "roce")


def sweep(directory: Path) -> None:
    print(f"loss sweep: two planes at {NIC_BPS / 1e6:.0f} Mbit/s, {DELAY_US / 1000:.0f} ms "
          f"one way, 2 QPs, 4 paths each (metaroce)")
    base: dict[str, float] = {}
    for pct in LOSSES:
        for transport in TRANSPORTS:
            run, lost = loss(directory / f"{transport}{pct}", transport, pct)
            goodput = run.goodput_bps()
            base.setdefault(transport, goodput)
            resent = run.total("retransmitted")
            ratio = f"{resent / lost:.2f}" if lost else "-"
            print(f"  {pct:4}% {transport:8}: goodput {goodput / 1e6:6.1f} Mbit/s = "
                  f"{goodput / base[transport]:.2f} of loss-free; lost on the links {lost}, "
                  f"resent {resent} (resent/lost {ratio}), of which arrived twice "
                  f"{run.total('duplicates')}; timeouts {run.total('timeouts')}, NAKs "
                  f"{run.total('naks')}; sent - received "
                  f"{run.total('sent') - run.total('packets')}")


def delays(directory: Path) -> None:
    with planes(directory / "delays", [Impairment(delay_us=1000),
                                       Impairment(delay_us=10_000)]) as fabric:
        run = fabric.rdma(Settings(iterations=0, duration_ms=2000, paths=4, rate_bps=NIC_BPS))
        lost = fabric.lost()
    srtts = sorted({p.srtt_ns // 100_000 / 10 for p in run.flows[0].requester.paths})
    print(f"paths 1 ms and 10 ms one way: resent {run.total('retransmitted')}, spurious (arrived "
          f"twice) {run.total('duplicates')}, timeouts {run.total('timeouts')}, lost {lost}; "
          f"the paths' smoothed RTTs {srtts} ms; goodput {run.goodput_bps() / 1e6:.1f} Mbit/s")


def incasts(directory: Path) -> None:
    print(f"8:1 incast, every host and the congested port at {NIC_BPS / 1e6:.0f} Mbit/s:")
    for transport, what in (("roce", "RoCEv2 + DCQCN, PFC"),
                            ("metaroce", "MetaRoCE-style, no PFC")):
        outcome = incast_run(directory / transport, transport)
        run = outcome.run
        rtt = run.base_rtt_ns()
        converged = run.converged_s(window=5)
        when = (f"{converged * 1000:.0f} ms = {converged * 1e9 / rtt:.0f} base RTTs "
                f"({rtt / 1000:.0f} us)" if converged is not None else "never")
        print(f"  {what}: every sender within 10% of fair share after {when}; goodput "
              f"{run.goodput_bps() / NIC_BPS:.2f} of the port; queue peak {outcome.peak_bytes} B "
              f"= {outcome.peak_bytes * 8 / NIC_BPS * 1e3:.1f} ms of line rate; dropped "
              f"{outcome.dropped} (sent - received {run.total('sent') - run.total('packets')}); "
              f"ECN marks {outcome.marked} (responders saw {run.total('ce')}); CNPs "
              f"{run.total('cnps')}; ECN echoes {run.total('ecn_echoes')}; PAUSE frames "
              f"{outcome.pauses} (NICs counted {sum(r.pause_frames for r in run.reports.values())}"
              f", paused {run.pause_ns / 1e9:.2f} s in all); resent {run.total('retransmitted')}")


def gray(directory: Path) -> None:
    fault_s = 1.0
    with planes(directory / "gray", [Impairment(delay_us=500)] * 4) as fabric:
        run = fabric.rdma(
            Settings(iterations=0, duration_ms=3000, paths=8, rate_bps=NIC_BPS // 2),
            actions=[(fault_s, lambda: fabric.impair(2, Impairment(delay_us=500, loss_pct=100)))])
    flow = run.flows[0]
    dead = [p for p in flow.requester.paths if p.dead]
    start = run.reports[SENDER].start_ns
    after = max((p.abandoned_ns - start) / 1e9 - fault_s for p in dead) if dead else None
    rates = run.rates_bps(flow, 10)
    before = rates[int(0.3 / run.bin_s)]
    later = rates[int(2.0 / run.bin_s)]
    print(f"gray failure, plane 2 of 4 drops all from {fault_s:.1f} s: paths abandoned "
          f"{len(dead)} (planes {sorted({p.plane for p in dead})}) after "
          f"{[p.abandon_timeouts for p in dead]} timeouts, {after * 1000 if after else 0:.0f} ms "
          f"after the fault; placed rate {before / 1e6:.1f} Mbit/s before, {later / 1e6:.1f} "
          f"after = {later / before:.2f} (3 of 4 planes: 0.75); error {flow.requester.error}")


def speed(directory: Path) -> None:
    with planes(directory / "speed", [None, None]) as fabric:
        run = fabric.rdma(Settings(iterations=4000, size=16384, paths=4, rate_bps=10 ** 10))
    flow = run.flows[0]
    pps = flow.requester.sent / flow.requester.seconds
    print(f"one engine, unpaced over two bare veths: {pps:,.0f} data packets/s sent (and as "
          f"many acknowledgements taken), {flow.goodput_bps() / 1e9:.2f} Gbit/s of 1 KiB packets")


def main() -> None:
    directory = Path(tempfile.mkdtemp(prefix="fl-transport."))
    sweep(directory)
    delays(directory)
    incasts(directory)
    gray(directory)
    speed(directory)


if __name__ == "__main__":
    main()
