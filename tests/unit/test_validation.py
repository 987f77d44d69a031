"""Validation without a lab: profiles and their errors, tiers and host order, the checks'
verdicts, and ranks running every collective over loopback TCP (real processes)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.core.errors import TopologyError
from harness.topology.pipeline import plan_from_file
from harness.traffic.collective import COLLECTIVES
from harness.validation.checks import judge_all
from harness.validation.profile import Check, Profile, load_profile
from harness.validation.run import Pair, Row, Validation, spread, tiers
from tests.conftest import TOPOLOGIES


def test_the_default_profile_loads_and_judges_something() -> None:
    profile = load_profile()
    assert profile.sizes == [4 << 10, 64 << 10, 1 << 20] and profile.checks
    assert set(profile.collectives) == set(COLLECTIVES)


@pytest.mark.parametrize(("text", "where"), [
    ("sizes: [4KiB, 2 pages]\n", "profile.yml:1: sizes[1]: '2 pages' is not a size"),
    ("tiers: [1]\n", "profile.yml:1: tiers[0]"),
    ("collectives: [all_reduce:ring,\n  allreduce]\n",
     "profile.yml:2: collectives[1]: unknown collective 'allreduce'"),
    ("checks:\n  - {metric: rtt_p99_us}\n", "profile.yml:2: checks[0]: give one bound"),
    ("checks:\n  - {metric: rtt_p99_us, max: 1, relative_to: p2p_GBps}\n",
     "relative_to: p2p_GBps scales bandwidths, not rtt_p99_us"),
    ("checks:\n  - {metric: busbw_GBps, min: 1, collective: 'broadcast*'}\n",
     "collective 'broadcast*' matches none"),
    ("itertions: 5\n", "profile.yml:1: itertions: unknown key 'itertions'\n    fix: did you "
     "mean 'iterations'?"),
])
def test_a_bad_profile_names_file_line_and_key(tmp_path: Path, text: str, where: str) -> None:
    (tmp_path / "profile.yml").write_text(text)
    with pytest.raises(TopologyError) as raised:
        load_profile(tmp_path / "profile.yml")
    assert "problem(s) in validation profile" in str(raised.value)
    assert where in str(raised.value).replace(str(tmp_path) + "/", "")


def test_hosts_alternate_between_regions_and_tiers_skip_what_does_not_fit() -> None:
    lab = SimpleNamespace(plan=plan_from_file(TOPOLOGIES / "bag-mini.yml"))
    order = spread(lab)
    regions = [lab.plan.node(h).region for h in order]
    assert all(a != b for a, b in itertools.pairwise(regions)), regions
    chosen, notes = tiers(Profile(tiers=[2, 8, 64, "all"]), order)
    assert {k: len(v) for k, v in chosen.items()} == {"2": 2, "8": 8}
    assert notes == ["tier 64 skipped: the lab has 8 hosts"], "all = 8: measured once"


def _result(*, ok: bool = True) -> Validation:
    rows = [Row("2", 2, name, 1 << 20, 1000.0, 1.0, 0.8 if name == "all_to_all" else 2.0, ok)
            for name in ("all_reduce:ring", "all_to_all")]
    return Validation("lab", {"2": ["a", "b"]}, [Pair("a", "b", 50.0, 90.0, 10.0),
                                                 Pair("b", "a", 60.0, 300.0, 12.0)], rows)


def test_checks_pass_fail_and_scale_by_the_runs_own_bandwidth() -> None:
    profile = Profile(checks=[
        Check(metric="rtt_p99_us", max=200),
        Check(metric="busbw_GBps", collective="all_reduce:*", min=0.15, relative_to="p2p_GBps"),
        Check(metric="busbw_GBps", collective="*", size=1 << 20, tier=2, min=0.1,
              relative_to="p2p_GBps")])
    verdicts = judge_all(profile, _result())
    assert [v.ok for v in verdicts] == [True, False, True, False]
    assert verdicts[1].failures == ["b->a: rtt_p99_us 300 > 200"]
    assert verdicts[3].failures == ["all_to_all 1048576 B tier 2 (2 hosts): busbw_GBps 0.8 < 1.1"]


def test_a_check_that_measured_nothing_fails_and_wrong_results_always_do() -> None:
    profile = Profile(checks=[Check(metric="time_us", collective="all_gather:ring", max=1e9)])
    verdicts = judge_all(profile, _result(ok=False))
    assert not verdicts[0].ok and "a rank's result differs" in verdicts[0].failures[0]
    assert not verdicts[1].ok and "measured nothing" in verdicts[1].failures[0]


def test_ranks_over_loopback_run_every_collective_and_check_it(tmp_path: Path) -> None:
    """4000 bytes are 500 int64s, rounded down to a multiple of 3 ranks: 498, 3984 bytes."""
    members = [{"name": f"r{i}", "group": "g", "addr": f"127.0.0.{11 + i}"} for i in range(3)]
    spec = {"members": members, "port": 7899, "timeout": 20, "pairs": [["r0", "r2"]],
            "pings": 20, "stream_bytes": 1 << 20,
            "tests": [{"collective": name, "size": 4000, "iterations": 2}
                      for name in COLLECTIVES]}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    ranks = [subprocess.Popen([sys.executable, "-m", "harness.traffic.rank",
                               str(tmp_path / "spec.json"), m["name"]]) for m in members]
    assert [r.wait(timeout=60) for r in ranks] == [0, 0, 0]
    results = [json.loads((tmp_path / f"{m['name']}.json").read_text()) for m in members]
    for result in results:
        assert [(t["collective"], t["size"], t["ok"], len(t["seconds"]))
                for t in result["tests"]] == [(name, 3984, True, 2) for name in COLLECTIVES]
    p2p = results[0]["p2p"]
    assert [(p["a"], p["b"], len(p["rtt_us"])) for p in p2p] == [("r0", "r2", 20)]
    assert results[1]["p2p"] == results[2]["p2p"] == [], "the pair's first rank reports it"


def test_collectives_turn_the_ranks_times_into_nccl_tests_figures(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """run.collectives() without a lab: the ranks' results as rank.py writes them, in; a row
    per collective and size, out. A collective's time is per iteration the slowest rank's,
    and the median of those; algbw = size / time (the size each rank ran, as nccl-tests
    prints it) and busbw = algbw x nccl-tests' factor for 4 ranks (test_collective.py says
    where each factor comes from)."""
    from harness.validation import run
    hosts = ["h1", "h2", "h3", "h4"]
    size = 1 << 20
    # iteration k takes 1, 2 and 3 ms; h3 is the slowest rank, by 0.5 ms, every time
    seconds = {h: [0.001, 0.002, 0.003] for h in hosts}
    seconds["h3"] = [s + 0.0005 for s in seconds["h3"]]
    factor = {"all_reduce:ring": 1.5, "all_reduce:tree": 1.5, "all_reduce:hierarchical": 1.5,
              "all_gather:ring": 0.75, "reduce_scatter:ring": 0.75, "all_to_all": 0.75}
    asked = []

    def ranks(lab: object, ran_on: list[str], spec: dict, timeout: float,
              transport: str | None = None) -> dict:
        asked.append((ran_on, spec))
        return {h: {"tests": [{"collective": t["collective"], "size": t["size"],
                               "seconds": seconds[h], "ok": h != "h2" or t["collective"]
                               != "all_to_all"} for t in spec["tests"]]} for h in ran_on}

    monkeypatch.setattr(run, "run_ranks", ranks)
    profile = Profile(sizes=[size], iterations=3, collectives=list(factor))
    rows = run.collectives(SimpleNamespace(), profile, "all", hosts)
    [(ran_on, spec)] = asked
    assert ran_on == hosts and spec["pairs"] == []
    assert [(t["collective"], t["size"], t["iterations"]) for t in spec["tests"]] == \
        [(name, size, 3) for name in factor]
    assert [r.collective for r in rows] == list(factor)
    for row in rows:
        assert (row.tier, row.hosts, row.size) == ("all", 4, size)
        assert row.time_us == pytest.approx(2500.0), "median of the slowest rank's times"
        assert row.algbw_GBps == pytest.approx(size / 0.0025 / 1e9), row.collective
        assert row.busbw_GBps == pytest.approx(size / 0.0025 / 1e9 * factor[row.collective]), \
            row.collective
        assert row.ok == (row.collective != "all_to_all"), "one rank's wrong result fails it"
