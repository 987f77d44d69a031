"""Exercises as files: every shipped one loads and its templates render against its own
topology's plan (no lab needed); a bad one is refused with its file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.errors import LabError, TopologyError
from harness.faults.targets import select_nodes
from harness.topology.pipeline import plan_from_file
from harness.training.exercise import load_exercise, shipped
from harness.training.template import Renderer
from tests.conftest import TOPOLOGIES

ASKED = {"fpf-plane-down", "wrong-peer-asn", "bag-flap-no-damping", "rbb-wrong-sid",
         "leaf-fib-full"}


def test_the_asked_exercises_ship() -> None:
    assert {p.stem for p in shipped()} >= ASKED


@pytest.mark.parametrize("path", shipped(), ids=lambda p: p.stem)
def test_a_shipped_exercise_renders_against_its_topology(path: Path) -> None:
    ex = load_exercise(path)
    plan = plan_from_file(ex.topology_file, ex.name)
    render = Renderer(plan).render
    for step in [*ex.setup, *ex.solution]:
        fields = step.model_dump()
        nodes = fields.get("nodes") or fields.get("node")
        for node in select_nodes(plan, render(nodes)):
            rendered = render(fields, node)
            assert "{{" not in str(rendered) and "{%" not in str(rendered), rendered
    for check in ex.checks:
        render(check.model_dump(by_alias=True))
    assert all("{{" not in h for h in render(ex.hints))
    assert ex.setup != ex.solution


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "broken.yml"
    path.write_text(text)
    return path


GOOD = f"""title: t
topology: {TOPOLOGIES / 'clos.yml'}
story: s
setup:
  - do: exec
    nodes: leaf1
    cmd: "true"
hints: [h]
checks:
  - check: sessions
solution:
  - do: exec
    nodes: leaf1
    cmd: "true"
"""


def test_a_good_exercise_loads(tmp_path: Path) -> None:
    ex = load_exercise(write(tmp_path, GOOD))
    assert ex.name == "broken" and ex.topology_file == TOPOLOGIES / "clos.yml"


@pytest.mark.parametrize(("change", "line", "key", "says"), [
    (("cmd: \"true\"\nhints", "cmnd: \"true\"\nhints"), 7, "setup[0].cmnd",
     "did you mean 'cmd'?"),
    (("check: sessions", "check: session"), 10, "checks[0]", "'sessions'"),
    (("hints: [h]", "hints: []"), 8, "hints", "at least 1"),
    ((f"topology: {TOPOLOGIES / 'clos.yml'}", "topology: nowhere.yml"), 2, "topology",
     "no file"),
])
def test_a_bad_exercise_names_file_line_and_key(tmp_path: Path, change: tuple[str, str],
                                               line: int, key: str, says: str) -> None:
    path = write(tmp_path, GOOD.replace(*change))
    with pytest.raises(TopologyError) as err:
        load_exercise(path)
    text = str(err.value)
    assert f"{path}:{line}: {key}" in text and says in text, text
    assert "exercise" in text


def test_an_unknown_name_in_a_template_is_an_error() -> None:
    plan = plan_from_file(TOPOLOGIES / "clos.yml")
    render = Renderer(plan).render
    assert render("{{ asn('spine1') + 1 }}") == plan.node("spine1").asn + 1
    spine_end = plan.node("spine1").interfaces[0].ipv4.split("/")[0]  # leaf1:eth1's peer
    assert render("{{ peer_ip('leaf1', 'spine1') }}") == spine_end
    with pytest.raises(LabError, match="no_such"):
        render("{{ no_such }}")
    with pytest.raises(LabError, match="no BGP session"):
        render("{{ peer_ip('leaf1', 'leaf2') }}")
