"""doctor's verdict (harness/deploy/readiness.py) on made-up hosts, and doctor without root: it says
what needs root and exits 1, never a traceback, and probes nothing."""

from __future__ import annotations

import argparse
import os

import pytest

from harness.cli import doctor as doctor_cli
from harness.deploy.readiness import Host, verdict
from harness.instruments.capacity import (
    Capacity,
    NodeCost,
    Room,
    capacity,
    costs,
    recall,
    remember,
    room,
)
from harness.instruments.resources import Cost, Resources
from harness.linux.features import Tool
from harness.topology.augment import augment
from harness.topology.loader import load_text
from harness.topology.pipeline import plan_from_file
from harness.topology.plan import LabPlan
from tests.conftest import TOPOLOGIES

IMPAIRED = """
name: longhaul
topology:
  nodes: {a: {role: leaf, kind: sai}, b: {role: spine, kind: sai}}
  links: [{endpoints: ["a:eth1", "b:eth1"], distance_km: 400}]
"""


def host(*features: str, tools: tuple[str, ...] = ("frr", "nft"), mib: float = 20_000,
         share: bool = True, neighbours: str | None = None) -> Host:
    return Host(feature=set(features).__contains__, tool=set(tools).__contains__,
                available_mib=mib, can_share_memory=share,
                neighbour_problem=lambda plan: neighbours)


@pytest.fixture(scope="module")
def longhaul() -> LabPlan:
    return augment(load_text(IMPAIRED))


@pytest.fixture(scope="module")
def fpf_mini() -> LabPlan:
    return plan_from_file(TOPOLOGIES / "fpf-mini.yml")


def test_impaired_links_take_netem_then_the_userspace_engine_then_cannot(longhaul) -> None:
    assert str(verdict("l", longhaul, host("netem", "nexthop_groups"))) == "ready"
    fallback = verdict("l", longhaul, host("tc_redirect", "nexthop_groups"))
    assert fallback.ready and "userspace engine: no sch_netem" in str(fallback)
    stuck = verdict("l", longhaul, host("nexthop_groups"))
    assert not stuck.ready and "sch_netem or tc redirect" in str(stuck)


def test_sai_switches_need_nexthop_groups_and_frr(longhaul) -> None:
    v = verdict("l", longhaul, host("netem", tools=()))
    assert str(v).startswith("not ready: FRR") and "nexthop groups" in str(v)


def test_opt_ins_are_named_not_taken(fpf_mini) -> None:
    v = verdict("fpf-mini", fpf_mini, host("nexthop_groups", mib=500, neighbours="short"))
    assert v.ready and "--raise-neighbour-limits" in str(v) and "--share-memory on" in str(v)
    v = verdict("fpf-mini", fpf_mini, host("nexthop_groups", mib=500, share=False))
    assert not v.ready and "no KSM to share" in str(v)
    nft = verdict("fpf-mini", fpf_mini, host("nexthop_groups", tools=("frr",)))
    assert "nftables" in str(nft)  # its hosts spray over 8 planes


def test_doctor_without_root_says_so_and_exits_1(monkeypatch, capsys) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(doctor_cli, "features", lambda: pytest.fail("probed without root"))
    monkeypatch.setattr(doctor_cli, "tools", lambda: [Tool("frr", "/usr/lib/frr/zebra", "8.4")])
    assert doctor_cli.doctor(argparse.Namespace(json=False)) == 1
    said = capsys.readouterr().out
    assert "not ready" in said and "sudo labctl doctor" in said and "zebra" in said
    assert doctor_cli.doctor(argparse.Namespace(json=True)) == 1
    assert '"ready": false' in capsys.readouterr().out


def test_a_qos_buffer_needs_the_classic_bpf_redirect_its_port_engines_take_frames_by() -> None:
    incast = plan_from_file(TOPOLOGIES / "incast.yml")
    assert verdict("incast", incast, host("nexthop_groups", "cls_bpf_redirect")).ready
    v = verdict("incast", incast, host("nexthop_groups"))
    assert not v.ready and "classic BPF filter and mirred" in str(v)


def measured(plan: LabPlan, per_node: dict[str, tuple[float, float]]) -> Resources:
    """A made-up measurement of `plan`: each node's (PSS MiB, cores); the rest run nothing."""
    nodes = [Cost(n.name, processes=int(n.name in per_node), pss_mib=per_node.get(n.name,
             (0, 0))[0], cpu_cores=per_node.get(n.name, (0, 0))[1]) for n in plan.nodes]
    lab = Cost("lab", pss_mib=sum(c.pss_mib for c in nodes),
               cpu_cores=sum(c.cpu_cores for c in nodes))
    return Resources(nodes, [], lab, 2, 0.5, 24_000, 10_000)


def test_a_kind_costs_its_nodes_mean_and_a_host_is_told_apart_by_its_planes(fpf_mini) -> None:
    found = measured(fpf_mini, {"p0-leaf1": (50, 0.01), "p1-leaf1": (60, 0.03),
                                "host1": (100, 0.2)})
    got = {c.kind: (c.nodes, c.pss_mib, c.cores) for c in costs(fpf_mini, found)}
    assert got == {"sai leaf": (2, 55, pytest.approx(0.02)),
                   "host, NIC over 8 planes": (1, 100, 0.2)}


def test_the_room_gives_back_what_labs_hold_and_keeps_the_reserve_and_half_the_cores(
        fpf_mini) -> None:
    found = measured(fpf_mini, {"host1": (1000, 0.25)})
    # 10 GiB available + 1000 MiB the lab holds - a tenth of 24 GiB; 0.5 idle + 0.25 - 1
    assert room([found], 0.5, 2, 24_000, 10_000) == Room(mib=8600, cores=pytest.approx(-0.25))
    assert room([], 1.5, 2, 24_000, 10_000) == Room(mib=7600, cores=0.5)


def test_a_kind_fits_until_memory_or_cpu_runs_out_first(tmp_path) -> None:
    leaf = NodeCost("sai leaf", 4, 50.0, 0.01, "fpf-mini", 0.0)
    assert capacity(leaf, Room(mib=1000, cores=0.5)) == Capacity("sai leaf", 20, "memory")
    assert capacity(leaf, Room(mib=100_000, cores=0.5)) == Capacity("sai leaf", 50, "CPU")
    assert capacity(leaf, Room(mib=-5, cores=-0.1)).fits == 0
    idle = NodeCost("frr leaf", 1, 30.0, 0.0, "pair", 0.0)  # no CPU at rest: memory decides
    assert capacity(idle, Room(mib=300, cores=0.0)) == Capacity("frr leaf", 10, "memory")
    path = tmp_path / "costs.json"
    assert recall(path) == []
    remember([leaf, idle], path)
    newer = NodeCost("sai leaf", 24, 54.0, 0.02, "fpf-mini", 1.0)
    assert remember([newer], path) == [idle, newer] == recall(path)
