"""Deploy's stages over a fake runtime, without root: order, the journal and plan written
before any node exists, rollback on failure and on Ctrl-C, a converge failure keeping the lab,
and a lab reopened with the runtime it was deployed with."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import pytest

from harness import runtime
from harness.core.errors import LabError
from harness.deploy.lab import JOURNAL_FILE, PLAN_FILE, Lab, destroy_lab
from harness.deploy.stages import Progress, Stage, create_nodes, deploy_stages, run_exec
from harness.linux.journal import Journal
from harness.runtime.base import ImageOf
from harness.runtime.context import LabContext
from harness.topology.pipeline import plan_from_file
from harness.topology.plan import LabPlan, NodePlan

TOPOLOGIES = Path(__file__).parent.parent.parent / "topologies"
EVENTS: list[str] = []  # what the fake runtime was asked to do, in order


class FakeRuntime:
    """Nodes are names in a set shared by every instance of one lab (like namespaces are)."""

    name = "fake"
    cannot_share_memory = "fake nodes run nothing"
    nodes: ClassVar[dict[str, set[str]]] = {}
    failing: ClassVar[set[str]] = set()  # commands whose exit status is 1

    def __init__(self, lab: str, journal: Journal) -> None:
        self.lab, self.journal = lab, journal

    def prepare(self, plan: LabPlan, image_of: ImageOf) -> LabPlan:
        return plan

    def check(self, plan: LabPlan, *, start: bool) -> None:
        EVENTS.append("check")

    def create_nodes(self, nodes: Sequence[NodePlan]) -> None:
        journal = self.journal.path.read_text()
        EVENTS.append(f"create {len(nodes)} (journal: {journal.strip()})")
        self.nodes.setdefault(self.lab, set()).update(n.name for n in nodes)

    def run(self, node: str, argv: Sequence[str], **_: object) -> subprocess.CompletedProcess:
        EVENTS.append(f"run {node} {' '.join(argv)}")
        rc = 1 if argv[-1] in self.failing else 0
        return subprocess.CompletedProcess(argv, rc, "", "no such thing" if rc else "")

    def confine(self, node: str, argv: Sequence[str]) -> list[str]:
        return list(argv)

    def existing_nodes(self) -> list[str]:
        return sorted(self.nodes.get(self.lab, ()))

    def destroy(self) -> list[int]:
        EVENTS.append("destroy")
        self.nodes.pop(self.lab, None)
        return []

    @staticmethod
    def all_lab_names() -> set[str]:
        return {lab for lab, nodes in FakeRuntime.nodes.items() if nodes}


@pytest.fixture
def plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LabPlan:
    monkeypatch.setenv("FABRIC_LAB_ROOT", str(tmp_path))
    monkeypatch.setitem(runtime.RUNTIMES, "fake", f"{__name__}:FakeRuntime")
    EVENTS.clear()
    FakeRuntime.nodes.clear()
    FakeRuntime.failing = set()
    plan = plan_from_file(TOPOLOGIES / "pair.yml", "stages")
    r1 = plan.node("r1").model_copy(update={"exec": ["echo one", "echo two"]})
    return plan.model_copy(update={"nodes": [r1, plan.node("r2")]})


def recorded(name: str) -> Stage:
    return Stage(name, lambda lab, progress: EVENTS.append(name))


def test_stages_run_in_order_after_the_journal_and_plan_exist(plan: LabPlan) -> None:
    lab = Lab(plan, "fake")
    lab.deploy(stages=[Stage("nodes", create_nodes), recorded("wire"), Stage("exec", run_exec)])
    assert EVENTS == ["check", 'create 2 (journal: {"runtime": "fake"})', "wire",
                      "run r1 sh -c echo one", "run r1 sh -c echo two"]
    assert json.loads((lab.dir / PLAN_FILE).read_text())["runtime"] == "fake"
    assert isinstance(Lab.open("stages").runtime, FakeRuntime)
    assert Lab.open("stages").plan == lab.plan


def test_a_failing_stage_rolls_the_whole_lab_back(plan: LabPlan) -> None:
    FakeRuntime.failing = {"echo two"}
    lab = Lab(plan, "fake")
    with pytest.raises(LabError, match=r"r1: exec 'echo two' failed \(1\): no such thing"):
        lab.deploy(stages=[Stage("nodes", create_nodes), Stage("exec", run_exec),
                           recorded("never")])
    assert "never" not in EVENTS and EVENTS[-1] == "destroy"
    assert not lab.dir.exists() and FakeRuntime.nodes == {}


def test_a_lab_that_does_not_converge_is_kept_but_ctrl_c_rolls_back(plan: LabPlan) -> None:
    def no_convergence(lab: LabContext, progress: Progress) -> None:
        raise LabError("did not converge")

    def interrupted(lab: LabContext, progress: Progress) -> None:
        raise KeyboardInterrupt

    lab = Lab(plan, "fake")
    with pytest.raises(LabError):
        lab.deploy(stages=[Stage("nodes", create_nodes),
                           Stage("converge", no_convergence, rolls_back=False)])
    assert lab.dir.exists() and FakeRuntime.nodes["stages"] == {"r1", "r2"}
    with pytest.raises(LabError, match="already exists"):
        Lab(plan, "fake").deploy(stages=[Stage("nodes", create_nodes)])
    assert destroy_lab("stages") and not lab.dir.exists()
    with pytest.raises(KeyboardInterrupt):
        lab.deploy(stages=[Stage("nodes", create_nodes),
                           Stage("converge", interrupted, rolls_back=False)])
    assert not lab.dir.exists() and FakeRuntime.nodes == {}


def test_destroy_uses_the_runtime_the_journal_names(plan: LabPlan) -> None:
    Lab(plan, "fake").deploy(stages=[Stage("nodes", create_nodes)])
    (Path(Lab.open("stages").dir) / PLAN_FILE).unlink()  # only the journal is left
    assert destroy_lab("stages") and FakeRuntime.nodes == {} and EVENTS[-1] == "destroy"
    assert not (Lab(plan, "fake").dir / JOURNAL_FILE).exists()


def test_no_frr_wires_and_runs_exec_but_starts_nothing() -> None:
    assert [s.name for s in deploy_stages()] == ["nodes", "wire", "impair", "nics", "start",
                                                 "exec", "converge"]
    assert [s.name for s in deploy_stages(start=False)] == ["nodes", "wire", "impair", "nics",
                                                            "exec"]
    assert [s.rolls_back for s in deploy_stages()][-1] is False
