"""Congestion on the wire: an N:1 incast into a port draining at its line rate, through
fl-port engines in real namespaces (harness/testing/incast.py), with real PAUSE frames.

Rates are small (hosts at 40 Mbit/s, the congested port at 10 Mbit/s) so two cores carry
four senders; every check is a count or a ratio, the same at any rate.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.core.wait import wait_until
from harness.nodes.switch.sai.headroom import EMULATED_RESPONSE_US, for_km
from harness.testing.incast import LOSSLESS_TC, Buffers, Incast, incast

pytestmark = pytest.mark.e2e

HOST_BPS, PORT_BPS = 40_000_000, 10_000_000
SENDERS = 4
BURST = 300  # datagrams per sender: 4 x 300 x 1.4 kB is 10x the buffer the group may use
WIRE = 1400 + 28 + 14 + 24  # a datagram on the wire: UDP/IP, Ethernet, preamble, FCS, gap


@pytest.fixture(scope="module")
def lossless(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Incast]:
    with incast(tmp_path_factory.mktemp("pfc"), SENDERS, HOST_BPS, PORT_BPS) as fabric:
        yield fabric


def test_incast_with_pfc_loses_nothing_and_pauses_each_sender_on_the_wire(
        lossless: Incast) -> None:
    result = lossless.burst(BURST)
    assert result.lost == 0, result.received
    queue = result.switch.port(f"p{SENDERS}").queues[LOSSLESS_TC]
    assert queue.stats["SAI_QUEUE_STAT_DROPPED_PACKETS"] == 0
    assert queue.stats["SAI_QUEUE_STAT_PACKETS"] == SENDERS * BURST
    for i in range(SENDERS):
        group = result.switch.port(f"p{i}").groups[LOSSLESS_TC]
        assert group.stats["SAI_INGRESS_PRIORITY_GROUP_STAT_DROPPED_PACKETS"] == 0
        # every PAUSE the switch sent reached the sender's port, where a capture counted it
        assert group.pfc_tx > 0
        assert result.pauses_on_wire[f"h{i}"] == group.pfc_tx
        nic = result.nics[f"h{i}"].port("eth0")
        assert nic.groups[LOSSLESS_TC].pfc_rx == group.pfc_tx
        assert nic.queues[LOSSLESS_TC].paused_us > 0
    # the congested port drained at its line rate, not faster
    wire_bits = SENDERS * BURST * WIRE * 8
    assert result.seconds >= 0.9 * wire_bits / PORT_BPS


def test_incast_without_pfc_drops_at_the_congested_queue(tmp_path: Path) -> None:
    with incast(tmp_path, SENDERS, HOST_BPS, PORT_BPS, pfc=False) as fabric:
        result = fabric.burst(BURST)
    queue = result.switch.port(f"p{SENDERS}").queues[LOSSLESS_TC]
    assert result.lost > 0
    assert queue.stats["SAI_QUEUE_STAT_DROPPED_PACKETS"] > 0
    assert sum(result.received.values()) == queue.stats["SAI_QUEUE_STAT_PACKETS"]
    assert not any(result.pauses_on_wire.values())


def test_ce_marks_at_the_receiver_follow_the_wred_profile(tmp_path: Path) -> None:
    """Two senders and a 15 kB XOFF point hold the queue between WRED's thresholds."""
    low, high, percent = 10_000, 40_000, 50
    buffers = Buffers(shared=15_000, wred=(low, high, percent))
    with incast(tmp_path, 2, HOST_BPS, PORT_BPS, buffers) as fabric:
        result = fabric.burst(800)
    queue = result.switch.port("p2").queues[LOSSLESS_TC]
    assert result.lost == 0
    assert result.ce == queue.stats["SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS"] > 0
    width = 2 * high / len(queue.hist)
    checked = 0
    for bucket, (marked, seen) in enumerate(queue.hist):
        middle = (bucket + 0.5) * width
        if seen < 100 or not low + width / 2 <= middle <= high - width / 2:
            continue
        expected = (middle - low) / (high - low) * percent / 100
        assert abs(marked / seen - expected) <= 0.10, (bucket, marked, seen, expected)
        checked += 1
    assert checked >= 2, queue.hist


def test_pfc_storm_is_found_by_the_watchdog_drained_and_restored(lossless: Incast) -> None:
    switch, storming = lossless.engines["switch"], lossless.engines["h0"]
    switch.command("watchdog 0 detect_ms=200 restore_ms=400 action=drop")
    switch.command(f"queue 0 {LOSSLESS_TC} guard=1")
    try:
        storming.command(f"storm 0 {1 << LOSSLESS_TC}")
        wait_until(lambda: switch.counters().port("p0").queues[LOSSLESS_TC].paused_us > 0, 5.0,
                   every=0.05)
        lossless.send(1, 0, 50)
        queue = wait_until(lambda: switch.counters().port("p0").queues[LOSSLESS_TC], 5.0,
                           until=lambda q: q.stats["PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED"] > 0,
                           every=0.05)
        assert queue.storm
        assert queue.stats["PFC_WD_QUEUE_STATS_TX_DROPPED_PACKETS"] > 0
        assert any("pfc_storm_detected port=p0" in e for e in switch.events())
    finally:
        storming.command("storm 0 0")
    started = time.monotonic()
    queue = wait_until(lambda: switch.counters().port("p0").queues[LOSSLESS_TC], 5.0,
                       until=lambda q: not q.storm, every=0.02)
    assert queue.stats["PFC_WD_QUEUE_STATS_DEADLOCK_RESTORED"] == 1
    # restored once no PAUSE came for 400 ms; the last came at most one storm refresh
    # (10 ms, fl_port.c) before the storm stopped, and then an XON
    assert time.monotonic() - started >= 0.4 - 0.01 - 0.02
    assert any("pfc_storm_restored port=p0" in e for e in switch.events())
    switch.command("watchdog 0 action=off")



@pytest.mark.parametrize(("profile_km", "drops"), [(40, False), (2, True)])
def test_headroom_from_the_cable_holds_what_a_shorter_profile_drops(
        tmp_path: Path, profile_km: int, drops: bool) -> None:
    """One sender at 100 Mbit/s over 40 km of fibre (the impairment engine's delay, both
    ways) into a port draining at a quarter of that: the PAUSE crosses the cable one way and
    the frames already sent the other. A profile sized for 40 km holds them; one for 2 km
    cannot."""
    rate = 100_000_000
    room = for_km(profile_km, rate, 1500, EMULATED_RESPONSE_US).bytes
    buffers = Buffers(pool=2_000_000, shared=60_000, headroom=room, queue_limit=400_000,
                      wred=None)
    with incast(tmp_path, 1, rate, rate // 4, buffers) as fabric:
        fabric.cable(0, 40)
        result = fabric.burst(1000, pps=1.25 * rate / (WIRE * 8))  # paced: no CPU storm
    group = result.switch.port("p0").groups[LOSSLESS_TC]
    dropped = group.stats["SAI_INGRESS_PRIORITY_GROUP_STAT_DROPPED_PACKETS"]
    assert group.pfc_tx > 0
    assert result.lost == dropped  # what was lost, the full headroom dropped
    # the bytes in flight over 40 km: a round trip of line rate, and the frames begun
    in_flight = for_km(40, rate, 1500, 0).bytes - for_km(0, rate, 1500, 0).bytes
    if drops:
        assert dropped > 0
    else:
        assert dropped == 0
        peak = group.stats["SAI_INGRESS_PRIORITY_GROUP_STAT_XOFF_ROOM_WATERMARK_BYTES"]
        assert in_flight / 2 < peak <= room


def test_pause_slows_a_victim_that_shares_only_the_senders_port(tmp_path: Path) -> None:
    """The first sender's datagrams alternate between the incast's receiver and a host on an
    uncongested port. With PFC its port is paused for the incast and the victim's flow with
    it (head-of-line blocking): the sender drains at its share of the congested port, half
    of it the victim's. Without PFC the victim has half the sender's line rate."""
    rates = {}
    for pfc in (True, False):
        with incast(tmp_path / str(pfc), SENDERS, HOST_BPS, PORT_BPS, pfc=pfc,
                    victim=True) as fabric:
            result = fabric.burst(BURST)
        assert result.victim is not None and result.victim.lost == 0
        rates[pfc] = result.victim_rate(WIRE)
    assert rates[False] > 0.8 * HOST_BPS / 2
    assert rates[True] < 1.2 * PORT_BPS / SENDERS


def test_a_switch_engine_late_with_its_pause_loses_nothing_and_counts_what_it_let_in(
        tmp_path: Path) -> None:
    """The switch's engine stops (as a VM's stalled vCPU stops it) while a sender puts 200
    frames on its wire: the engine takes them in at once, and its PAUSE leaves tens of ms
    after an engine on time would have sent it. What the sender sent meanwhile would overrun
    the headroom, but it is the emulation's lateness, not the cable's: admitted, counted
    apart, and no more than the sender's line rate over the stall."""
    room = for_km(0, HOST_BPS, 1500, EMULATED_RESPONSE_US).bytes
    frames, size = 200, 1400
    with incast(tmp_path, 1, HOST_BPS, PORT_BPS, Buffers(
            pool=2_000_000, headroom=room, queue_limit=400_000, wred=None)) as fabric:
        switch, nic = fabric.engines["switch"], fabric.engines["h0"]
        assert switch.pid is not None
        os.kill(switch.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            fabric.send(0, 1, frames, size)
            wait_until(lambda: nic.counters().port("eth0").tx, 5.0, every=0.01,
                       until=lambda tx: tx >= frames)  # all on the wire, at line rate
        finally:
            os.kill(switch.pid, signal.SIGCONT)
        stall_s = time.monotonic() - stopped
        wait_until(lambda: switch.counters().port("p1").tx, 5.0, every=0.05,
                   until=lambda tx: tx >= frames)  # every frame out of the receiver's port
        counters = switch.counters()
    group = counters.port("p0").groups[LOSSLESS_TC].stats
    queue = counters.port("p1").queues[LOSSLESS_TC].stats
    assert group["SAI_INGRESS_PRIORITY_GROUP_STAT_DROPPED_PACKETS"] == 0
    assert queue["SAI_QUEUE_STAT_PACKETS"] == frames
    late = group["FL_PG_STAT_LATE_PAUSE_ADMITTED_BYTES"]
    frame = size + 28 + 14  # UDP/IP, Ethernet: what the buffer holds
    assert late > frames * frame - Buffers().shared - room - frame  # past XOFF and headroom
    assert late <= stall_s * HOST_BPS / 8
    assert group["SAI_INGRESS_PRIORITY_GROUP_STAT_XOFF_ROOM_WATERMARK_BYTES"] <= room
