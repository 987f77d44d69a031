"""A lab that needs more neighbours (ARP or IPv6 ND) than the host-wide limit holds is refused
up front, with the sysctl that fixes it; the limits and the entries in use are read from /proc,
and a bench's raised limits are put back."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from harness.linux import features as kernel
from harness.testing import plan_from

STATS_HEADER = "entries  allocs   destroys\n"


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """set_host(afi, limit, in_use) fakes one table; both start roomy."""
    tables = {t.afi: dataclasses.replace(t, limits=tmp_path / t.afi, stats=tmp_path / t.stats.name)
              for t in kernel.NEIGHBOUR_TABLES}
    monkeypatch.setattr(kernel, "NEIGHBOUR_TABLES", tuple(tables.values()))

    def set_host(afi: str, limit: int, in_use: int) -> None:
        table = tables[afi]
        table.limits.mkdir(exist_ok=True)
        for key, value in table.settings(limit).items():
            (table.limits / key).write_text(f"{value}\n")
        table.stats.write_text(STATS_HEADER + f"{in_use:08x} 00000000 00000000\n" * 2)
    for afi in tables:
        set_host(afi, 1 << 20, 0)
    return set_host


def test_a_lab_that_fits_is_let_through(host):
    host("ipv4", limit=1024, in_use=100)
    host("ipv6", limit=1024, in_use=100)
    assert kernel.neighbour_room(plan_from("topologies/fpf-mini.yml")) is None


@pytest.mark.parametrize("afi", ["ipv4", "ipv6"])
def test_a_lab_that_does_not_fit_is_refused_with_the_fix(host, afi):
    plan = plan_from("topologies/fpf-mini.yml")  # 96 session ends a family: ~192 neighbours
    host(afi, limit=1024, in_use=900)
    problem = kernel.neighbour_room(plan)
    assert problem is not None
    assert f"about 192 {afi} neighbour entries" in problem
    assert "room for 124" in problem and "900 in use" in problem
    assert (f"sysctl -w net.{afi}.neigh.default.gc_thresh3=2048 "
            f"net.{afi}.neigh.default.gc_thresh2=1024 "
            f"net.{afi}.neigh.default.gc_thresh1=512") in problem
    assert "Deploy with --raise-neighbour-limits" in problem
    other = "ipv6" if afi == "ipv4" else "ipv4"
    assert other not in problem.split("raise them yourself")[1]


def test_fpf_64_does_not_fit_the_default_limits(host):
    """Both tables are 1024 by default; fpf-64 has 1152 session ends in each family."""
    for afi in ("ipv4", "ipv6"):
        host(afi, limit=1024, in_use=0)
    problem = kernel.neighbour_room(plan_from("topologies/fpf-64.yml"))
    assert problem is not None
    assert "net.ipv4.neigh.default.gc_thresh3=4096" in problem
    assert "net.ipv6.neigh.default.gc_thresh3=4096" in problem


def limits() -> dict[str, dict[str, int]]:
    return {t.afi: {key: int((t.limits / key).read_text()) for key in t.settings(1)}
            for t in kernel.NEIGHBOUR_TABLES}


def test_a_bench_raises_the_limits_for_its_run_and_puts_them_back(host, tmp_path):
    for afi in ("ipv4", "ipv6"):
        host(afi, limit=1024, in_use=0)
    plan = plan_from("topologies/fpf-64.yml")
    before = limits()
    with kernel.neighbour_limit_raised(plan, str(tmp_path), where=tmp_path / "run"):
        assert kernel.neighbour_room(plan) is None
        assert all(t.limit() == 4096 for t in kernel.NEIGHBOUR_TABLES)  # the suggested fix
    assert limits() == before


def test_labs_that_raised_the_limits_put_them_back_with_the_last_whatever_their_root(
        host, tmp_path):
    """Two labs under two labs roots raise them; destroying either first leaves them raised
    for the other, and the host's values come back with the last (linux/hostwide.py)."""
    for afi in ("ipv4", "ipv6"):
        host(afi, limit=1024, in_use=0)
    before, run = limits(), tmp_path / "run"
    first, second = tmp_path / "root-a" / "fpf-64", tmp_path / "root-b" / "fpf-mini"
    for lab in (first, second):
        lab.mkdir(parents=True)
    assert kernel.hold_neighbour_limits(plan_from("topologies/fpf-64.yml"), str(first), run)
    raised = limits()
    assert raised != before
    assert kernel.hold_neighbour_limits(plan_from("topologies/fpf-mini.yml"), str(second),
                                        run) == []  # fits in what the first raised
    assert not kernel.release_neighbour_limits(str(first), run) and limits() == raised
    second.rmdir()  # the second lab's directory went in a crash: a sweep puts them back
    assert kernel.release_neighbour_limits(None, run) and limits() == before
