"""doctor's verdict (harness/deploy/readiness.py) on made-up hosts, and doctor without root: it says
what needs root and exits 1, never a traceback, and probes nothing."""

from __future__ import annotations

import argparse
import os

import pytest

from harness.cli import doctor as doctor_cli
from harness.deploy.readiness import Host, verdict
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
