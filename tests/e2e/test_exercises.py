"""Every shipped exercise as a trainee meets it: after `start` its checks fail, a hint is
given, and once the reference fix is applied (`solve`) they pass; an exercise whose setup
breaks nothing is refused and leaves no lab behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.deploy.lab import lab_names
from harness.testing.chaos import labctl
from harness.testing.plugin import RUNTIME
from harness.training.exercise import load_exercise, shipped
from tests.conftest import TOPOLOGIES

pytestmark = pytest.mark.e2e


def checks(name: str) -> tuple[int, dict]:
    out = labctl("exercise", "check", name, "--json", timeout=120)
    return out.returncode, json.loads(out.stdout)


@pytest.mark.parametrize("path", shipped(), ids=lambda p: p.stem)
def test_an_exercise_fails_its_checks_until_fixed(path: Path) -> None:
    ex = load_exercise(path)
    try:
        started = labctl("exercise", "start", ex.name, "--runtime", RUNTIME, timeout=600)
        assert started.returncode == 0, started.stdout + started.stderr
        assert ex.title in started.stdout
        code, before = checks(ex.name)
        assert code == 1 and not before["solved"], before
        assert any(not c["ok"] for c in before["checks"])
        hint = labctl("exercise", "hint", ex.name)
        assert hint.returncode == 0 and f"hint 1 of {len(ex.hints)}" in hint.stdout, hint
        solved = labctl("exercise", "solve", ex.name, timeout=300)
        assert solved.returncode == 0, solved.stdout + solved.stderr
        code, after = checks(ex.name)
        assert code == 0 and after["solved"] and after["hints_shown"] == 1, after
        print(f"{ex.name}: failing at start: "
              f"{[c['check'] for c in before['checks'] if not c['ok']]}; "
              f"{solved.stdout.strip().splitlines()[-1]}")
    finally:
        labctl("destroy", ex.name)


def test_an_exercise_that_breaks_nothing_is_refused_and_leaves_no_lab(tmp_path: Path) -> None:
    path = tmp_path / "harmless.yml"
    path.write_text(f"""title: nothing breaks
topology: {TOPOLOGIES / 'clos.yml'}
story: a lab that works
setup: [{{do: exec, nodes: leaf1, cmd: "true"}}]
hints: [none needed]
checks: [{{check: sessions, nodes: "leaf*"}}]
solution: [{{do: exec, nodes: leaf1, cmd: "true"}}]
broken_within_s: 3
""")
    try:
        out = labctl("exercise", "start", str(path), "--runtime", RUNTIME, timeout=600)
        assert out.returncode == 2, out  # a bad exercise file is bad input
        assert "every check still passes" in out.stderr and str(path) in out.stderr, out.stderr
        assert "harmless" not in lab_names()
    finally:
        labctl("destroy", "harmless")
