"""A lab that needs more IPv6 neighbours than the host-wide limit holds is refused up front,
with the sysctl that fixes it; the limit and the entries in use are read from /proc."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import kernel
from harness.testing import plan_from

STATS_HEADER = "entries  allocs   destroys\n"


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    limits, stats = tmp_path / "neigh", tmp_path / "ndisc_cache"
    limits.mkdir()
    monkeypatch.setattr(kernel, "ND_LIMITS", limits)
    monkeypatch.setattr(kernel, "ND_CACHE_STATS", stats)

    def set_host(limit: int, in_use: int) -> None:
        (limits / "gc_thresh3").write_text(f"{limit}\n")
        stats.write_text(STATS_HEADER + f"{in_use:08x} 00000000 00000000\n" * 2)
    return set_host


def test_a_lab_that_fits_is_let_through(host):
    host(limit=1024, in_use=100)
    assert kernel.neighbour_room(plan_from("topologies/fpf-mini.yml")) is None


def test_a_lab_that_does_not_fit_is_refused_with_the_fix(host):
    plan = plan_from("topologies/fpf-mini.yml")  # 96 IPv6 session ends: ~192 neighbours
    host(limit=1024, in_use=900)
    problem = kernel.neighbour_room(plan)
    assert problem is not None
    assert "room for 124" in problem and "900 in use" in problem
    assert "sysctl -w net.ipv6.neigh.default.gc_thresh3=2048" in problem
