"""Scenario files: what a bad one is told (file, line, key), and the seed's draws."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.errors import TopologyError
from harness.testing import plan_from
from harness.testing.scenario import choices, load_scenario

PLAN = plan_from("topologies/fpf-mini.yml")
SHIPPED = Path(__file__).resolve().parents[2] / "scenarios" / "fpf-plane-failover.yml"


def test_the_same_seed_draws_the_same_and_a_name_is_drawn_once() -> None:
    scenario = load_scenario(SHIPPED)
    first = choices(PLAN, scenario, 7)
    assert first == choices(PLAN, scenario, 7)
    assert set(first) == {"{host}", "{host2}", "{plane}", "{link}"}
    assert first["{host}"] != first["{host2}"]
    assert first["{plane}"] in {str(p) for p in range(8)}
    draws = {tuple(choices(PLAN, scenario, seed).values()) for seed in range(20)}
    assert len(draws) > 10  # the seed does choose


@pytest.mark.parametrize("text, said", [
    ("flow: {src: a, dst: b}\nsteps:\n  - {at: 1s, do: plane-dwn 3}\n",
     ":3: steps[0]: 'plane-dwn' is no fault verb; verbs: bgp-reset"),
    ("flow: {src: a, dst: b}\nsteps:\n  - {at: 1s, expect: {within: 1s}}\n",
     ":3: steps[0].expect: an expectation is one of converged"),
    ("flow: {src: a, dst: b}\nsteps:\n  - {at: soon, do: plane-down 3}\n",
     "'soon' is not a duration"),
    ("flow: {src: a, dst: b}\nsteps:\n  - {at: 1s, do: plane-down 3, expect: {converged: true}}"
     "\n", "a step has `do` (a fault verb) or `expect`, one of them"),
    ("flow: {src: a, dst: b}\nstep: []\n", "unknown key 'step'"),
    ("flow: {src: a, dst: b}\nsteps:\n  - {at: 1s, do: 'plane-down {plan}'}\n",
     "{plan} is no choice; write {plane}"),
])
def test_a_bad_scenario_is_told_where_and_what(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "bad.yml"
    path.write_text(text)
    with pytest.raises(TopologyError) as caught:
        load_scenario(path)
    assert f"{path}:" in str(caught.value) and said in str(caught.value), str(caught.value)
