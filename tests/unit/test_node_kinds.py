"""A node kind owns its differences: deploy, the runtimes, evidence, readiness and `inspect`
reach a node only through its kind's hooks (harness/nodes/base.py), so a new kind is its own
module plus one line in the registry (harness/nodes/kind.py), and nothing outside the node
kinds, the plan that assigns them and the generators that write them asks `Kind.x`."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from harness import runtime
from harness.deploy.lab import Lab
from harness.deploy.readiness import Host, verdict
from harness.deploy.stages import Stage, create_nodes, start_nodes
from harness.faults.evidence import node_state
from harness.linux.journal import Journal
from harness.nodes import kind as registry
from harness.nodes.columns import node_status
from harness.runtime.base import ImageOf, NodeImage
from harness.topology.augment import augment
from harness.topology.loader import load_text
from harness.topology.plan import LabPlan, NodePlan
from harness.topology.schema import Kind

REPO = Path(__file__).resolve().parents[2]
# Where kinds may be named: the kinds themselves, the plan that assigns them, the generators
# that write them, and the host kind's NIC (harness/spray: which hosts spray is its question).
KIND_AWARE = ("harness/nodes", "harness/topology", "harness/fabrics", "harness/spray")
CALLS: list[str] = []

TOPOLOGY = """
name: lamps
topology:
  nodes:
    a: {kind: linux}
    b: {kind: linux}
  links:
    - endpoints: ["a:eth1", "b:eth1"]
"""


class Lamp:
    """A kind of the test's own: every hook records that it was asked."""

    name = "lamp"
    fib_table = 254
    needs: ClassVar[dict[str, str]] = {"lamp_oil": "oil, which lamps burn"}

    def image(self, node: NodePlan) -> NodeImage:
        CALLS.append(f"image {node.name}")
        return NodeImage("fabric-lab/lamp", "a flame")

    def wire(self, lab: Any, node: NodePlan) -> None:
        CALLS.append(f"wire {node.name}")

    def start(self, lab: Any, node: NodePlan) -> None:
        CALLS.append(f"start {node.name}")

    def restart(self, lab: Any, node: NodePlan) -> None:
        CALLS.append(f"restart {node.name}")

    def converged(self, lab: Any, node: NodePlan) -> None:
        CALLS.append(f"converged {node.name}")

    def status(self, lab: Any, node: NodePlan) -> dict[str, Any]:
        return {"state": "running", "flame": "steady"}

    def evidence(self, lab: Any, node: NodePlan) -> dict[str, dict[str, Any]]:
        return {"lamp": {"glow": lambda: 1, "soot": lambda: 1 / 0}}


class ImagingRuntime:
    """Prepares a plan by asking each node's image, as the docker runtime does."""

    name = "imaging"
    cannot_share_memory = "it runs nothing"
    nodes: ClassVar[set[str]] = set()

    def __init__(self, lab: str, journal: Journal) -> None:
        self.lab, self.journal = lab, journal

    def prepare(self, plan: LabPlan, image_of: ImageOf) -> LabPlan:
        return plan.model_copy(update={"nodes": [
            n.model_copy(update={"image": image_of(n).built}) for n in plan.nodes]})

    def check(self, plan: LabPlan, *, start: bool) -> None:
        pass

    def create_nodes(self, nodes: Sequence[NodePlan]) -> None:
        self.nodes.update(n.name for n in nodes)

    def run(self, node: str, argv: Sequence[str], **_: object) -> Any:
        raise OSError("no kernel here")

    def existing_nodes(self) -> list[str]:
        return sorted(self.nodes)

    def destroy(self) -> list[int]:
        self.nodes.clear()
        return []

    @staticmethod
    def all_lab_names() -> set[str]:
        return set()


@pytest.fixture
def lamps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Lab:
    monkeypatch.setenv("FABRIC_LAB_ROOT", str(tmp_path))
    monkeypatch.setitem(runtime.RUNTIMES, "imaging", f"{__name__}:ImagingRuntime")
    monkeypatch.setitem(registry.KINDS, Kind.linux, Lamp())  # the one registry line
    CALLS.clear()
    return Lab(augment(load_text(TOPOLOGY, "lamps.yml")), "imaging")


def test_a_new_kind_is_asked_everything_through_its_hooks(lamps: Lab) -> None:
    assert [n.image for n in lamps.plan.nodes] == ["fabric-lab/lamp"] * 2
    lamps.deploy(stages=[Stage("nodes", create_nodes), Stage("start", start_nodes)])
    assert CALLS[:2] == ["image a", "image b"]
    assert sorted(CALLS[2:]) == ["start a", "start b"], "started by the deploy's workers"
    assert node_status(lamps, "a")["flame"] == "steady"
    kept = node_state(lamps, "a")
    assert kept["lamp"]["glow"] == 1 and "ZeroDivisionError" in kept["lamp"]["soot"]["error"]
    host = Host(feature=lambda f: f != "lamp_oil", tool=lambda t: True, available_mib=1e6,
                can_share_memory=True, neighbour_problem=lambda plan: None)
    assert verdict("lamps", lamps.plan, host).missing == ["oil, which lamps burn"]
    lamps.destroy()


def kind_questions(source: str) -> list[int]:
    """Lines naming a member of Kind (`node.kind is Kind.sai`): code asking which kind."""
    members = {k.name for k in Kind}
    return [node.lineno for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id == "Kind" and node.attr in members]


def test_nothing_outside_the_kinds_asks_which_kind_a_node_is() -> None:
    asking = [f"{path.relative_to(REPO)}:{line}"
              for path in sorted((REPO / "harness").rglob("*.py"))
              if not str(path.relative_to(REPO)).startswith(KIND_AWARE)
              for line in kind_questions(path.read_text())]
    assert not asking, f"outside the node kinds, code asks which kind a node is: {asking}"
    assert kind_questions("if node.kind is Kind.bridge:\n    join(node)\n") == [1], \
        "the check sees the shape the wire stage had"


def test_every_kind_of_the_schema_has_its_module() -> None:
    assert set(registry.KINDS) == set(Kind)
    for kind in registry.KINDS.values():
        assert all(callable(getattr(kind, hook)) for hook in
                   ("image", "wire", "start", "restart", "status", "evidence")), kind.name
