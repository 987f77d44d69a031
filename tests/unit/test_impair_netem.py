"""The exact tc commands the netem backend runs (this kernel has no sch_netem to run them)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.links.impair.netem import (
    apply_argv,
    clear_argv,
    netem_args,
    qdisc_counters,
    tbf_burst_bytes,
)
from harness.topology.plan import Impairment


def test_delay_only_is_one_netem_root() -> None:
    assert apply_argv("eth1", Impairment(delay_us=200), 1500) == [
        ["tc", "qdisc", "replace", "dev", "eth1", "root", "handle", "1:",
         "netem", "limit", "50000", "delay", "200us"]]


def test_every_netem_parameter() -> None:
    imp = Impairment(delay_us=5000, jitter_us=20, loss_pct=0.1, duplicate_pct=0.05)
    assert netem_args(imp) == ["netem", "limit", "50000", "delay", "5000us", "20us",
                               "loss", "0.1%", "duplicate", "0.05%"]


def test_jitter_without_delay_still_gives_a_delay_base() -> None:
    assert netem_args(Impairment(jitter_us=10)) == ["netem", "limit", "50000",
                                                    "delay", "0us", "10us"]


def test_loss_only() -> None:
    assert netem_args(Impairment(loss_pct=10)) == ["netem", "limit", "50000", "loss", "10%"]


def test_fibre_delay_and_tiny_loss_are_fixed_point() -> None:
    """tc cannot parse exponents, and a 40 km fibre delay has a long fraction."""
    args = netem_args(Impairment(delay_us=195.8689234, loss_pct=0.00001))
    assert args == ["netem", "limit", "50000", "delay", "195.868923us", "loss", "0.00001%"]


def test_rate_puts_tbf_at_root_and_netem_below_it() -> None:
    argv = apply_argv("eth2", Impairment(delay_us=1000, rate_bps=10_000_000_000), 9000)
    assert argv == [
        ["tc", "qdisc", "replace", "dev", "eth2", "root", "handle", "1:", "tbf",
         "rate", "10000000000bit", "burst", "1250000", "latency", "100ms"],
        ["tc", "qdisc", "replace", "dev", "eth2", "parent", "1:1", "handle", "10:",
         "netem", "limit", "50000", "delay", "1000us"]]


def test_tbf_burst_is_at_least_two_frames() -> None:
    assert tbf_burst_bytes(1_000_000, 1500) == 2 * 1514
    assert tbf_burst_bytes(80_000_000_000, 1500) == 10_000_000


def test_clear_removes_the_root() -> None:
    assert clear_argv("eth1") == ["tc", "qdisc", "del", "dev", "eth1", "root"]


def test_counters_from_real_tc_output_with_a_child_under_tbf() -> None:
    """tests/corpus/tc: `tc -s -j qdisc` captured on this kernel from a tbf root with a child
    at handle 10: (a pfifo where netem would sit), after a burst the child could not hold."""
    text = (Path(__file__).parent.parent / "corpus" / "tc" / "tbf-with-child-10.json").read_text()
    counters = qdisc_counters(json.loads(text))
    assert counters == {"rx": 15 + 2986, "tx": 15, "lost": 2986, "overlimit": 0, "queued": 0}


def test_no_counters_without_our_root_qdisc() -> None:
    assert qdisc_counters([{"kind": "noqueue", "handle": "0:", "root": True}]) is None
    assert qdisc_counters([]) is None
