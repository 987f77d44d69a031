"""RDMA transports on the wire: fl-rdma between real namespaces, judged from outside.

Losses come from the links' impairment engines and are counted there; ECN marks, drops and
PAUSE frames from the switch's fl-port engine; framing from a capture dissected by scapy.
Each count is held against the transport's own (harness/testing/multipath.py, incast.py).
Rates are small (tens of Mbit/s) so two cores carry every engine; every check is a ratio
or a count, the same at any rate. Rates and goodputs are judged per second of line time the
sender's NIC had: fl-rdma counts how long the host (its run queue, the hypervisor) held it
past something due, which no NIC is and which the transport cannot answer for.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from scapy.contrib.roce import AETH, BTH
from scapy.layers.inet import IP, UDP
from scapy.utils import rdpcap

from harness.nodes.rdma.engine import ENGINE, Settings
from harness.testing.multipath import RECEIVER, SENDER, planes
from harness.testing.transport import NIC_BPS, RUN_MS, incast_run, loss
from harness.topology.plan import Impairment
from harness.traffic.rdma import Run

pytestmark = pytest.mark.e2e

def agrees_with_links(run: Run, lost: int) -> None:
    """What the links dropped is what left the requesters and never reached the responders."""
    assert run.total("sent") - run.total("packets") == lost
    assert run.counters()["errors"] == 0


@pytest.fixture(scope="module")
def loss_free(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    runs = {}
    for transport in ("metaroce", "roce"):
        runs[transport], lost = loss(tmp_path_factory.mktemp(transport), transport, 0)
        assert lost == 0
    return runs


def keeps(run: Run, loss_free: Run, loss_pct: float) -> bool:
    """Goodput as the losses allow: each lost packet costs the line time of its resend."""
    return run.line_goodput_bps() >= 0.95 * (1 - loss_pct / 100) * loss_free.line_goodput_bps()


def test_at_one_percent_loss_metaroce_keeps_its_goodput_and_resends_only_the_lost(
        tmp_path: Path, loss_free: dict[str, Run]) -> None:
    run, lost = loss(tmp_path, "metaroce", 1.0)
    agrees_with_links(run, lost)
    assert lost > 0
    assert keeps(run, loss_free["metaroce"], 1.0)
    # every resend but the few a path timeout sent early was for a packet a link dropped
    assert run.total("retransmitted") - run.total("duplicates") == lost
    assert run.total("retransmitted") <= 1.1 * lost


def test_at_five_percent_loss_go_back_n_collapses_where_metaroce_does_not(
        tmp_path: Path, loss_free: dict[str, Run]) -> None:
    gbn, gbn_lost = loss(tmp_path / "roce", "roce", 5.0)
    mp, mp_lost = loss(tmp_path / "metaroce", "metaroce", 5.0)
    agrees_with_links(gbn, gbn_lost)
    agrees_with_links(mp, mp_lost)
    # go-back-N resends the window behind each loss: many packets per one lost
    assert gbn.total("retransmitted") > 5 * gbn_lost
    assert gbn.total("naks") > 0
    assert gbn.line_goodput_bps() < 0.6 * loss_free["roce"].line_goodput_bps()
    assert keeps(mp, loss_free["metaroce"], 5.0)


def test_paths_ten_times_apart_in_delay_resend_nothing(tmp_path: Path) -> None:
    near, far = Impairment(delay_us=1000), Impairment(delay_us=10_000)
    with planes(tmp_path, [near, far]) as fabric:
        run = fabric.rdma(Settings(iterations=0, duration_ms=RUN_MS, paths=4, rate_bps=NIC_BPS))
        assert fabric.lost() == 0
    # nothing resent, nothing twice: a path's timer, should a busy scheduler hold the
    # responder past it, resends its oldest packet only if no ACK came first
    assert run.total("retransmitted") == 0, (run.counters(), run.flows[0].requester.paths)
    assert run.total("duplicates") == 0
    srtt = {p.plane: p.srtt_ns / 1e6 for p in run.flows[0].requester.paths}
    # each path measured its own RTT: at least its one-way delay (ACKs come back unimpaired)
    assert srtt[1] >= 10 and 1 <= srtt[0] < srtt[1] - 5, srtt
    # both planes carried their share: the slow one's window grew to its BDP
    sent = {plane: sum(p.sent for p in run.flows[0].requester.paths if p.plane == plane)
            for plane in (0, 1)}
    assert sent[1] > 0.8 * sent[0]


def test_a_blackholed_plane_is_abandoned_within_three_timeouts_and_the_rate_holds(
        tmp_path: Path) -> None:
    """A gray failure: plane 2 of 4 drops everything while its link stays up.

    Each plane's NIC runs at a quarter of NIC_BPS: at half, the four planes' engines and the
    transport took both cores whole (0% idle), and the rate after the fault moved with the
    share the scheduler gave each engine (for 50-100 ms at a time, one plane's worth less),
    not with the planes left. What the host still takes (a paused VM, a late wake-up) is
    taken out as the sender's held line time; a window it held for most of is not judged."""
    fault_s, end_s = 1.0, 3.0
    with planes(tmp_path, [Impairment(delay_us=500)] * 4) as fabric:
        run = fabric.rdma(
            Settings(iterations=0, duration_ms=int(end_s * 1000), paths=8, rate_bps=NIC_BPS // 4),
            actions=[(fault_s, "plane 2 gray",
                      lambda: fabric.impair(2, Impairment(delay_us=500, loss_pct=100)))])
    flow = run.flows[0]
    assert not flow.requester.error
    gray = [p for p in flow.requester.paths if p.plane == 2]
    assert gray and all(p.dead and p.abandon_timeouts == 3 for p in gray)
    assert not any(p.dead for p in flow.requester.paths if p.plane != 2)
    abandoned_s = max(p.abandoned_ns for p in gray) / 1e9 - run.reports[SENDER].start_ns / 1e9
    rto_s = 3 * (max(p.srtt_ns for p in gray) / 1e9 + Settings().rto_min_us / 1e6)
    assert abandoned_s - fault_s <= rto_s + 0.02  # three timeouts, and a wake-up's slack
    # the responder's rate: three planes' worth right after the abandonment, not less
    rates = run.line_rates_bps(flow, 10)
    bin_s = run.bin_s
    before = [r for r in rates[int(0.3 / bin_s):int(0.9 / bin_s)] if r is not None]
    after = rates[int((abandoned_s + 0.02) / bin_s):int((end_s - 0.2) / bin_s)]
    judged = [r for r in after if r is not None]
    assert len(judged) >= 0.8 * len(after), "the host held the sender most of the run"
    assert min(judged) >= 0.9 * 3 / 4 * sum(before) / len(before), (before, after)


@pytest.mark.parametrize("transport", ["roce", "metaroce"])
def test_a_host_that_stops_every_engine_makes_no_timeout(tmp_path: Path, transport: str) -> None:
    """A paused VM stops every engine at once (CI's hypervisor did, for up to 74 ms). Here the
    sender, the link's engine (0.5 ms one way: packets are in flight) and the responder stop
    for 100 ms, longer than RC's ACK timeout (67 ms) and than the paths' timers (their floor
    raised to 50 ms, so that no scheduler's stall of the responder alone times one out); the
    sender and the link run again 1 ms before the responder: the sender wakes to no ACK, with
    its timers long due. It counts the time it was held, and a timer that fell due in it
    starts over, so the ACKs the responder sends once it runs come first: nothing times out,
    nothing is resent."""
    stop_s, at_s = 0.1, 0.5
    with planes(tmp_path, [Impairment(delay_us=500)]) as fabric:
        def pause() -> None:
            first = [engine_pid(fabric.ns[SENDER], name) for name in (ENGINE, "fl-impair")]
            responder = engine_pid(fabric.ns[RECEIVER], ENGINE)
            for pid in (*first, responder):
                os.kill(pid, signal.SIGSTOP)
            time.sleep(stop_s)
            for pid in first:
                os.kill(pid, signal.SIGCONT)
            time.sleep(0.001)
            os.kill(responder, signal.SIGCONT)
        run = fabric.rdma(Settings(transport=transport, iterations=0, duration_ms=1500,
                                   rate_bps=NIC_BPS, rto_min_us=50_000),
                          actions=[(at_s, "stop all", pause)])
    assert run.total("timeouts") == 0 and run.total("retransmitted") == 0, run.counters()
    assert not run.flows[0].requester.error
    held = run.reports[SENDER].held  # counted where it happened
    assert sum(held[int(at_s / run.bin_s):int((at_s + 3 * stop_s) / run.bin_s)]) >= stop_s * 1e9


def engine_pid(netns: str, name: str) -> int:
    """The process called `name` in a scratch namespace."""
    pids = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True,
                          check=True).stdout.split()
    return next(int(p) for p in pids if Path(f"/proc/{p}/comm").read_text().strip() == name)


def test_frames_are_rocev2_as_wireshark_and_scapy_read_them(tmp_path: Path) -> None:
    with planes(tmp_path, [None]) as fabric:
        pcap = tmp_path / "roce.pcap"
        capture = subprocess.Popen(["nsenter", f"--net={fabric.path(RECEIVER)}", "tcpdump",
                                    "-i", "p0", "-U", "-w", str(pcap), "udp port 4791"],
                                   stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        fabric.rdma(Settings(transport="roce", iterations=20, size=4096, rate_bps=NIC_BPS))
        capture.terminate()
        capture.wait(timeout=10)
    packets = [p for p in rdpcap(str(pcap)) if BTH in p]
    writes = [p for p in packets if p[IP].dst == fabric.address(RECEIVER, 0)]
    acks = [p for p in packets if AETH in p]
    assert writes and acks
    for p in writes:
        assert p[UDP].dport == 4791 and p[IP].tos == 26 << 2 | 2  # DSCP 26, ECT(0)
        assert p[BTH].opcode in (0x06, 0x07, 0x08)  # RC RDMA WRITE First, Middle, Last
        raw = bytes(p[IP])
        assert raw[-4:] == p[BTH].compute_icrc(raw)  # the invariant CRC scapy computes
    assert {p[BTH].opcode for p in writes} == {0x06, 0x07, 0x08}
    assert all(p[AETH].syndrome == 0 for p in acks)


def test_incast_with_dcqcn_over_pfc_loses_nothing_and_answers_each_mark(tmp_path: Path) -> None:
    outcome = incast_run(tmp_path, "roce")
    run, marked, pauses = outcome.run, outcome.marked, outcome.pauses
    assert outcome.dropped == 0
    assert run.total("retransmitted") == 0 and run.total("timeouts") == 0
    assert marked > 0 and run.total("ce") == marked  # the responders saw every mark
    assert 0 < run.total("cnps") <= marked  # at most one CNP per mark, rate-limited per QP
    assert sum(f.requester.cnps for f in run.flows) == run.total("cnps")
    assert pauses > 0 and sum(r.pause_frames for r in run.reports.values()) == pauses
    assert all(f.requester.rate_bps < NIC_BPS for f in run.flows)  # DCQCN cut every QP
    assert run.goodput_bps() > 0.8 * NIC_BPS


def test_incast_with_metaroce_and_no_pfc_shares_fairly_and_recovers_what_dropped(
        tmp_path: Path) -> None:
    outcome = incast_run(tmp_path, "metaroce")
    run = outcome.run
    assert outcome.pauses == 0
    assert run.total("sent") - run.total("packets") == outcome.dropped
    assert run.total("ce") == outcome.marked > 0
    assert run.total("ecn_echoes") == run.total("ce")
    assert run.counters()["errors"] == 0
    converged = run.converged_s(window=5)
    assert converged is not None and converged <= 0.5
    assert run.goodput_bps() > 0.8 * NIC_BPS


def test_an_engine_keeps_up_with_a_hundred_thousand_packets_a_second(tmp_path: Path) -> None:
    with planes(tmp_path, [None, None]) as fabric:
        run = fabric.rdma(Settings(iterations=2000, size=16384, paths=4,
                                   rate_bps=1_000_000_000))
    flow = run.flows[0]
    pps = flow.requester.sent / flow.requester.seconds
    assert flow.responder.bytes == 2000 * 16384
    assert pps >= 100_000, f"{pps:.0f} packets/s"

