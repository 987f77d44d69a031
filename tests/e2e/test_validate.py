"""labctl validate on the default Clos: a healthy lab passes the default profile, a gray link
fails it by name, a bad profile is refused before anything runs; -t checks a file undeployed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.deploy.lab import Lab
from harness.testing.chaos import labctl
from harness.traffic.collective import COLLECTIVES
from tests.conftest import REPO, TOPOLOGIES

pytestmark = pytest.mark.e2e

NAME = "e2eclos"


def test_a_topology_is_checked_without_deploying() -> None:
    out = labctl("validate", "-t", str(TOPOLOGIES / "clos.yml"))
    assert out.returncode == 0 and "valid: lab clos, 10 nodes (4 frr, 6 sai), 12 links, " \
        "24 BGP sessions" in out.stdout, out
    bad = REPO / "tests" / "corpus" / "bad" / "missing-node.yml"
    out = labctl("validate", "-t", str(bad))
    assert out.returncode == 2 and f"{bad}:10:" in out.stderr, out


def test_a_healthy_lab_passes_the_default_profile(clos_lab: Lab) -> None:
    out = labctl("validate", NAME, "--json")
    assert out.returncode == 0, out
    found = json.loads(out.stdout)
    assert found["passed"] and all(c["ok"] and c["measured"] for c in found["checks"])
    assert {t: len(h) for t, h in found["tiers"].items()} == {"2": 2, "all": 4}
    assert found["notes"] == ["tier 8 skipped: the lab has 4 hosts"]
    measured = {(r["tier"], r["collective"]) for r in found["collectives"]}
    assert measured == {(t, c) for t in ("2", "all") for c in COLLECTIVES}
    assert len(found["pairs"]) == 4 and all(p["rtt_p50_us"] > 0 for p in found["pairs"])


def test_a_gray_link_fails_the_latency_check_by_name(clos_lab: Lab) -> None:
    """5% each way on host1's link: 200 round trips meet ~19 losses, each a 200 ms+ TCP
    retransmission, so the 99th percentile is one of them (the stream through it may fall
    below its bound too: TCP halves its window at each loss). TCP still delivers every byte,
    so every collective's result stays right."""
    assert labctl("fault", NAME, "gray-loss", "host1--leaf1", "--loss", "5%").returncode == 0
    try:
        out = labctl("validate", NAME)
    finally:
        assert labctl("fault", NAME, "clear").returncode == 0
    assert out.returncode == 1, out
    assert "checks failed: rtt_p99_us <= 20000" in out.stderr, out
    assert "FAIL rtt_p99_us <= 20000" in out.stdout and "host1->host2: rtt_p99_us" in out.stdout
    assert "pass every rank holds the collective's result" in out.stdout


def test_a_bad_profile_is_refused_before_anything_runs(clos_lab: Lab, tmp_path: Path) -> None:
    profile = tmp_path / "p.yml"
    profile.write_text("tiers: [2]\nchecks:\n  - {metric: busbw_GBps, min: 1, max: 2}\n")
    runs = set((clos_lab.dir / "validation").glob("*"))
    out = labctl("validate", NAME, "--profile", str(profile))
    assert out.returncode == 2 and f"{profile}:3: checks[0]: give one bound" in out.stderr, out
    assert set((clos_lab.dir / "validation").glob("*")) == runs
