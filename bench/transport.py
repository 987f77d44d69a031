"""RDMA transports (fl-rdma), every figure from one run: a loss sweep for both transports,
resent against lost, paths ten times apart in delay, an 8:1 incast side by side (RoCEv2 with
DCQCN over PFC, MetaRoCE-style without PFC), a gray-failed plane, one engine's speed; then on
fpf-mini (deployed here) a plane down mid-transfer, and `labctl validate`'s collectives over
TCP and over the C transport against each run's own point-to-point bandwidth.

Losses are the links' (fl-impair counts them), drops and marks the switch's (fl-port), and
each is printed beside the transport's own count. Goodput is printed absolute and, per second
of line time the sender had (what fl-rdma says the host held it past its due times taken
out), against the loss-free run of the same transport measured here, so it means the same at
any rate and on a busy box.

    sudo .venv/bin/python bench/transport.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from harness.deploy.lab import deploy, destroy_lab
from harness.faults import Faults
from harness.nodes.rdma.engine import Settings
from harness.testing.multipath import SENDER, planes
from harness.testing.transport import DELAY_US, NIC_BPS, incast_run, loss
from harness.topology.plan import Impairment
from harness.traffic.rdma import rdma
from harness.validation.profile import Profile
from harness.validation.run import validate

LOSSES = (0.0, 0.1, 1.0, 5.0)
FPF_LAB = "bench-transport"
FPF_NIC_BPS = 10_000_000
TRANSPORTS = ("metaroce", "roce")


def sweep(directory: Path) -> None:
    print(f"loss sweep: two planes at {NIC_BPS / 1e6:.0f} Mbit/s, {DELAY_US / 1000:.0f} ms "
          f"one way, 2 QPs, 4 paths each (metaroce)")
    base: dict[str, float] = {}
    for pct in LOSSES:
        for transport in TRANSPORTS:
            run, lost = loss(directory / f"{transport}{pct}", transport, pct)
            goodput, line = run.goodput_bps(), run.line_goodput_bps()
            base.setdefault(transport, line)
            resent = run.total("retransmitted")
            ratio = f"{resent / lost:.2f}" if lost else "-"
            print(f"  {pct:4}% {transport:8}: goodput {goodput / 1e6:6.1f} Mbit/s, "
                  f"{line / 1e6:6.1f} per line second (held {run.held_s(SENDER) * 1e3:.0f} ms)"
                  f" = {line / base[transport]:.2f} of loss-free; lost on the links {lost}, "
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
            actions=[(fault_s, "plane 2 gray",
                      lambda: fabric.impair(2, Impairment(delay_us=500, loss_pct=100)))])
    flow = run.flows[0]
    dead = [p for p in flow.requester.paths if p.dead]
    start = run.reports[SENDER].start_ns
    after = max((p.abandoned_ns - start) / 1e9 - fault_s for p in dead) if dead else None
    rates = run.line_rates_bps(flow, 10)
    before = mean_bps(rates[int(0.3 / run.bin_s):int(0.9 / run.bin_s)])
    later = mean_bps(rates[int(1.5 / run.bin_s):int(2.8 / run.bin_s)])
    print(f"gray failure, plane 2 of 4 drops all from {fault_s:.1f} s: paths abandoned "
          f"{len(dead)} (planes {sorted({p.plane for p in dead})}) after "
          f"{[p.abandon_timeouts for p in dead]} timeouts, {after * 1000 if after else 0:.0f} ms "
          f"after the fault; placed rate per line second {before / 1e6:.1f} Mbit/s before, "
          f"{later / 1e6:.1f} after = {later / before:.2f} (3 of 4 planes: 0.75); the host "
          f"held the sender {run.held_s(SENDER) * 1e3:.0f} ms; error {flow.requester.error}")


def mean_bps(rates: list[float | None]) -> float:
    """The mean of the windows the host left the sender most of."""
    judged = [r for r in rates if r is not None]
    return sum(judged) / len(judged)


def speed(directory: Path) -> None:
    with planes(directory / "speed", [None, None]) as fabric:
        run = fabric.rdma(Settings(iterations=4000, size=16384, paths=4, rate_bps=10 ** 10))
    flow = run.flows[0]
    pps = flow.requester.sent / flow.requester.seconds
    print(f"one engine, unpaced over two bare veths: {pps:,.0f} data packets/s sent (its peer "
          f"acknowledging each receive batch), {flow.goodput_bps() / 1e9:.2f} Gbit/s of 1 KiB "
          f"packets")


def fpf() -> None:
    destroy_lab(FPF_LAB)
    lab = deploy("topologies/fpf-mini.yml", name=FPF_LAB, timeout=300)
    try:
        faults = Faults(lab)
        fault_s = 1.0
        try:
            run = rdma(lab, [("host1", "host3")],
                       Settings(iterations=0, duration_ms=2500, paths=8, rate_bps=FPF_NIC_BPS),
                       actions=[(fault_s, "plane 3 down", lambda: faults.plane_down(3))])
        finally:
            faults.undo_all()
        flow = run.flows[0]
        rates = run.rates_bps(flow, 5, completed=True)
        at = int(fault_s / run.bin_s)
        before = sum(rates[30:at - 5]) / len(rates[30:at - 5])
        # the first 50 ms window starting after the fault that completes 7/8 x 90% of before
        back = next((i - at for i in range(at + 1, len(rates))
                     if rates[i] >= 7 / 8 * 0.9 * before), None)
        print(f"fpf-mini, host1 -> host3 over 8 planes at {FPF_NIC_BPS / 1e6:.0f} Mbit/s each, "
              f"plane 3 down at {fault_s:.1f} s: {before / 1e6:.1f} Mbit/s completed before; "
              f"a 50 ms window completes 7/8 x 90% of it again from "
              f"{'never' if back is None else f'{back * run.bin_s * 1000:.0f} ms'} after the "
              f"fault; the application saw {'an error' if flow.requester.error else 'no error'}"
              f"; plane 3's path abandoned after "
              f"{[p.abandon_timeouts for p in flow.requester.paths if p.abandoned_ns]} timeouts")
        profile = Profile(tiers=[2, "all"], sizes=[1 << 20], iterations=3,
                          collectives=["all_reduce:ring"],
                          p2p={"pairs": 4, "pings": 20, "stream": 8 << 20})
        for transport in (None, "metaroce", "roce"):
            result = validate(lab, profile, transport)
            for row in result.rows:
                print(f"  validate over {result.transport}: all_reduce:ring at 1 MiB on "
                      f"{row.hosts} hosts, busbw {row.busbw_GBps:.4f} GB/s = "
                      f"{row.busbw_GBps / result.p2p_GBps:.2f} of the run's point to point "
                      f"({result.p2p_GBps:.3f} GB/s); results {'right' if row.ok else 'WRONG'}")
    finally:
        lab.destroy()


def main() -> None:
    directory = Path(tempfile.mkdtemp(prefix="fl-transport."))
    sweep(directory)
    delays(directory)
    incasts(directory)
    gray(directory)
    speed(directory)
    fpf()


if __name__ == "__main__":
    main()
