"""fl-rdma's settings, command line and report, and what a run makes of the reports (pure)."""

from __future__ import annotations

import json
import subprocess

import pytest

from harness.cli.rdma import pairs_of
from harness.core.build import built
from harness.core.errors import LabError
from harness.nodes.rdma.engine import ENGINE, Nic, Settings, argv, report
from harness.traffic.rdma import Flow, Run

BIN_MS = 10


def test_every_setting_is_a_key_the_engine_knows() -> None:
    """The C parser, not a copy of its list: every key passes, and it stops only at the
    missing local address it checks after them."""
    out = subprocess.run([str(built(ENGINE)), *Settings(transport="roce").args()],
                         capture_output=True, text=True)
    assert out.returncode == 2
    assert "need local=" in out.stderr and "unknown key" not in out.stderr
    out = subprocess.run([str(built(ENGINE)), "local=10.0.0.1", "windw=4"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "unknown key windw" in out.stderr


def test_bad_settings_are_refused_before_anything_runs() -> None:
    with pytest.raises(LabError, match="transport 'rocev3'"):
        Settings(transport="rocev3")
    with pytest.raises(LabError, match="iterations or a duration"):
        Settings(iterations=0, duration_ms=0)
    with pytest.raises(LabError, match="paths and qps"):
        Settings(paths=65)


def test_a_multi_plane_host_names_every_plane_and_its_peers_reach() -> None:
    me = Nic(1, ("10.0.0.1", "10.0.0.1"), ("eth1", "eth2"), (0xF100, 0xF101), ("10.0.0.1",))
    peer = Nic(2, ("10.0.0.2",) * 2, ("eth1", "eth2"), (0xF100, 0xF101), ("10.0.0.2",))
    words = argv("fl-rdma", me, [peer], Settings(), 123)
    assert {"id=1", "local=10.0.0.1,10.0.0.1", "ifaces=eth1,eth2", "marks=61696,61697",
            "start_ns=123", "peers=10.0.0.2"} <= set(words)


def test_sources_and_destination_make_a_pair_an_incast_or_all_to_all() -> None:
    assert pairs_of("h1", "h2", False) == [("h1", "h2")]
    assert pairs_of("h1,h2,h3", "h4", False) == [("h1", "h4"), ("h2", "h4"), ("h3", "h4")]
    assert pairs_of("a,b,c", None, True) == [("a", "b"), ("a", "c"), ("b", "a"), ("b", "c"),
                                             ("c", "a"), ("c", "b")]
    for bad in (("h1", None, False), ("h1,h2", "h2", False), ("a", None, True),
                ("a,b", "c", True)):
        with pytest.raises(LabError):
            pairs_of(*bad)


def engine_report(host: int, requesters: list[dict], responders: list[dict],
                  held: tuple[int, ...] = ()) -> str:
    """What fl-rdma prints: a ready line, then the report (the keys of its printf)."""
    return json.dumps({"ready": True}) + "\n" + json.dumps({
        "id": host, "transport": "metaroce", "start_ns": 0, "bin_ns": BIN_MS * 10**6,
        "pause_ns": 5000, "pause_frames": 2, "requesters": requesters, "held": list(held),
        "responders": responders})


def requester(qpn: int, peer: str, timeline: list[int]) -> dict:
    return {"qpn": qpn, "peer": peer, "bytes": sum(timeline), "messages": sum(timeline) // 1024,
            "first_ns": 0, "done_ns": len(timeline) * BIN_MS * 10**6, "sent": 100,
            "retransmitted": 3, "naks": 0, "timeouts": 1, "cnps": 0, "ecn_echoes": 4,
            "error": False, "rate_bps": 1e6, "min_rtt_ns": 50_000, "timeline": timeline,
            "paths": [{"plane": 0, "sport": 49152, "sent": 100, "retransmitted": 3,
                       "timeouts": 1, "ecn_echoes": 4, "dead": False, "abandoned_ns": 0,
                       "abandon_timeouts": 0, "srtt_ns": 60_000, "cwnd": 8.0}]}


def responder(qpn: int, source: str, timeline: list[int]) -> dict:
    return {"qpn": qpn, "source": source, "packets": 97, "bytes": sum(timeline),
            "messages": sum(timeline) // 1024, "duplicates": 0, "out_of_order": 2, "ce": 4,
            "cnps": 0, "naks": 0, "first_ns": 0, "last_ns": 1, "timeline": timeline}


def incast(first: list[int], second: list[int], held: tuple[int, ...] = ()) -> Run:
    a = report(engine_report(1, [requester(4096, "10.0.0.3", first)], [], held), "a")
    b = report(engine_report(2, [requester(8192, "10.0.0.3", second)], []), "b")
    c = report(engine_report(3, [], [responder(4096, "10.0.0.1", first),
                                     responder(8192, "10.0.0.2", second)]), "c")
    flows = [Flow("a", "c", a.requesters[0], c.responders[0]),
             Flow("b", "c", b.requesters[0], c.responders[1])]
    return Run(Settings(bin_ms=BIN_MS), {"a": a, "b": b, "c": c}, flows)


def test_an_incast_converges_when_every_flow_is_within_a_tenth_of_the_mean() -> None:
    # the first sender takes nearly everything for 30 ms, then both share evenly
    run = incast([9000, 9000, 9000, 5000, 5000, 5000, 5000],
                 [1000, 1000, 1000, 5000, 5000, 5000, 5000])
    assert run.converged_s(window=2) == pytest.approx(0.03)
    assert run.converged_s(window=2, tolerance=0.0) == pytest.approx(0.03)
    assert incast([9000] * 4, [1000] * 4).converged_s(window=2) is None
    assert run.rates_bps(run.flows[0], 2)[0] == 9000 * 2 * 8 / 0.02


def test_line_time_the_host_held_a_sender_is_not_counted_against_its_rate() -> None:
    # the first sender's engine: held half of its second bin and all of its third
    run = incast([1000, 500, 0, 1000], [1000] * 4, held=(0, 5 * 10**6, 10 * 10**6))
    first, second = run.flows
    assert run.line_shares(first, 1) == [1, 0.5, 0, 1]
    assert run.line_rates_bps(first, 1) == [1000 * 8 / 0.01] * 2 + [None, 1000 * 8 / 0.01]
    assert run.line_rates_bps(first, 2)[:2] == [pytest.approx(1500 * 8 / (0.02 * 0.75)), None]
    assert run.line_rates_bps(second, 1) == run.rates_bps(second, 1)  # its host held nothing
    assert run.held_s("a") == 0.015 and run.held_s("b") == 0
    assert run.line_goodput_bps() == pytest.approx(2500 * 8 / 0.025 + 4000 * 8 / 0.04)


def test_a_run_prints_perftests_columns_and_sums_both_ends_counters() -> None:
    run = incast([2048] * 10, [1024] * 10)
    perf = run.perftest()
    assert perf["#bytes"] == Settings().size
    assert perf["#iterations"] == 30  # messages, from both requesters
    assert perf["BW peak[Gb/sec]"] == pytest.approx(3072 * 8 / 0.01 / 1e9)
    assert perf["BW average[Gb/sec]"] == pytest.approx(30720 * 8 / 0.1 / 1e9)
    counters = run.counters()
    assert counters["retransmitted"] == 6 and counters["ce"] == 8 and counters["sent"] == 200
    assert run.total("packets") == 194  # the responders' side
    assert counters["pause_us"] == 15  # every engine's PAUSE time
    assert run.base_rtt_ns() == 50_000


def test_a_report_that_is_not_there_names_the_host() -> None:
    with pytest.raises(LabError, match="host7: fl-rdma gave no report"):
        report('{"ready": true}\n', "host7")
