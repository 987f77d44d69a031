"""Flow analysis: loss, outage window, reordering, duplicates, planes, latency."""

from __future__ import annotations

from harness.traffic.analysis import analyse

RATE = 1000  # 1 ms between packets
PLANES = {f"eth{p + 1}": p for p in range(4)}


def flow(count, lost=(), order=None, dup=()):
    send = [1_000_000_000 + i * 1_000_000 for i in range(count)]
    seqs = [s for s in (order or range(count)) if s not in lost] + list(dup)
    return send, {"seq": seqs, "sent_ns": [send[s] for s in seqs],
                  "recv_ns": [send[s] + 50_000 for s in seqs],
                  "nic": [f"eth{s % 4 + 1}" for s in seqs]}


def test_a_clean_flow():
    send, arrivals = flow(400)
    r = analyse("a", "b", send, arrivals, PLANES, RATE)
    assert (r.sent, r.received, r.lost, r.reordered, r.duplicates) == (400, 400, 0, 0, 0)
    assert r.per_plane == {0: 100, 1: 100, 2: 100, 3: 100} and r.outage_ms == 0
    assert r.latency_us["p50"] == 50 and r.latency_us["max"] == 50


def test_outage_spans_first_to_last_lost_packet_plus_one_interval():
    dead_plane_2 = [s for s in range(100, 200) if s % 4 == 2]  # 102 .. 198
    send, arrivals = flow(400, lost=dead_plane_2)
    r = analyse("a", "b", send, arrivals, PLANES, RATE)
    assert r.lost == 25 and r.outage_ms == 97.0  # (198 - 102) ms + 1 ms
    assert r.first_loss_s == 0.102 and r.last_loss_s == 0.198
    assert r.per_plane_after_outage == {0: 50, 1: 50, 2: 50, 3: 51}  # seq 199..399


def test_reordered_and_duplicated_packets_are_counted_not_lost():
    order = [0, 1, 3, 2, 4, 6, 5, 7]
    send, arrivals = flow(8, order=order, dup=(4,))
    r = analyse("a", "b", send, arrivals, PLANES, RATE)
    assert (r.lost, r.reordered, r.duplicates, r.received) == (0, 2, 1, 8)


def test_flow_covers_its_own_time_span_only():
    send, arrivals = flow(100)
    r = analyse("a", "b", send, arrivals, PLANES, RATE)
    assert r.covers(send[50]) and not r.covers(send[0] - 1) and not r.covers(send[-1] + 1)


def test_a_flow_with_nothing_received_reports_zero_latency():
    result = analyse("a", "b", [0, 10], {"seq": [], "sent_ns": [], "recv_ns": [], "nic": []},
                     {}, 1000.0)
    assert result.lost == 2 and result.latency_us["p99"] == 0.0
