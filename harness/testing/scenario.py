"""Fault scenarios: timed faults and expectations from a file, run under a flow, judged, and
written as JUnit; random choices (which plane, which link) come from a seed, so a seed replays
the same scenario and gives the same verdicts.

A scenario file:

    flow: {src: host1, dst: host3, rate_pps: 2000, seconds: 8, outage_below: 100ms}
    steps:
      - {at: 1s, do: "plane-down {plane}"}
      - {at: 1s, expect: {hosts_avoid_plane: "{plane}", within: 1s}}
      - {at: 4s, do: "plane-up {plane}"}
      - {at: 4s, expect: {converged: true, within: 30s}}

`do` is a verb of `labctl fault` as typed after the lab's name; `{plane}`, `{link}`,
`{spine}`, `{leaf}`, `{host}`, `{switch}` and `{node}` (with a suffix, `{plane2}`, for a second
one) are drawn once per run from the lab, without repeats. Steps run at their offset from the
flow's first packet, in file order; an expectation waits up to `within` and the steps after it
wait for it. At the end every fault still in place is undone and the lab converges again.
"""

from __future__ import annotations

import argparse
import random
import re
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from harness.core.errors import LabError
from harness.core.events import say
from harness.core.wait import NotReady
from harness.deploy.converge import wait_converged
from harness.deploy.lab import Lab
from harness.faults.injector import Faults, catalog
from harness.spray.nic import all_planes, spraying_hosts, wait_spray
from harness.testing.junit import Case, write_suite
from harness.topology.loader import load_model
from harness.topology.plan import LabPlan
from harness.topology.units import parse_duration_us
from harness.traffic.flow import run_flow

CHOICE = re.compile(r"\{(plane|link|spine|leaf|host|switch|node)(\w*)\}")
TAIL_S = 1.0  # the flow runs on this long past the last step
SETTLE_S = 120.0  # the lab converging again at the end


def _seconds(text: str) -> float:
    return parse_duration_us(text) / 1e6


def _known_choices(text: str) -> str:
    for name in re.findall(r"\{[^}]*\}", text):
        if not CHOICE.fullmatch(name):
            raise ValueError(f"{name} is no choice; write {{plane}}, {{link}}, {{spine}}, "
                             "{leaf}, {host}, {switch} or {node}, with a suffix for another "
                             "({host2})")
    return text


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Expect(_Strict):
    """One of: every session and loopback route back (`converged`), every spraying host
    keeping a plane out of its spray sets (`hosts_avoid_plane`), or spraying over every plane
    again (`hosts_use_all_planes`); each within `within` of the step's time."""

    within: str = "1s"
    converged: bool = False
    hosts_avoid_plane: str | None = None
    hosts_use_all_planes: bool = False

    @model_validator(mode="after")
    def one(self) -> Expect:
        if sum((self.converged, self.hosts_avoid_plane is not None,
                self.hosts_use_all_planes)) != 1:
            raise ValueError("an expectation is one of converged, hosts_avoid_plane, "
                             "hosts_use_all_planes")
        _known_choices(self.hosts_avoid_plane or "")
        _seconds(self.within)
        return self

    def text(self) -> str:
        what = "converged" if self.converged else "hosts use all planes" \
            if self.hosts_use_all_planes else f"hosts avoid plane {self.hosts_avoid_plane}"
        return f"{what} within {self.within}"


class Step(_Strict):
    at: str
    do: str | None = None
    expect: Expect | None = None
    enabled: bool = True

    @model_validator(mode="after")
    def one(self) -> Step:
        _seconds(self.at)
        if (self.do is None) == (self.expect is None):
            raise ValueError("a step has `do` (a fault verb) or `expect`, one of them")
        if self.do is not None:
            _known_choices(self.do)
            verb = shlex.split(self.do)[0] if self.do.strip() else ""
            if verb not in catalog().verbs:
                raise ValueError(f"{verb!r} is no fault verb; verbs: "
                                 f"{', '.join(sorted(catalog().verbs))}")
        return self

    def text(self) -> str:
        return self.do if self.do is not None else f"expect {self.expect.text()}"


class Flow(_Strict):
    src: str
    dst: str
    rate_pps: float = Field(2000, gt=0)
    seconds: float | None = Field(None, gt=0, description="default: the last step + 1 s")
    outage_below: str | None = None

    @field_validator("outage_below")
    @classmethod
    def duration(cls, value: str | None) -> str | None:
        if value is not None:
            _seconds(value)
        return value

    @field_validator("src", "dst")
    @classmethod
    def host(cls, value: str) -> str:
        return _known_choices(value)


class Scenario(_Strict):
    name: str = ""
    flow: Flow
    steps: list[Step] = Field(min_length=1)


def load_scenario(path: str | Path) -> Scenario:
    path = Path(path)
    return load_model(path, Scenario, "scenario", "a scenario is a mapping (flow, steps)",
                      "the path of a scenario .yml", name=path.stem)[0]


def choices(plan: LabPlan, scenario: Scenario, seed: int) -> dict[str, str]:
    """Each placeholder the scenario names, drawn from the lab with `seed`, in file order
    (a disabled step's too: enabling it changes no other step's draw)."""
    pools = {"plane": sorted({str(n.plane) for n in plan.nodes if n.plane is not None}, key=int),
             "link": [f"{link.a}--{link.b}" for link in plan.links],
             "node": [n.name for n in plan.nodes],
             "switch": [n.name for n in plan.nodes if n.plane is not None]}
    for role in ("spine", "leaf", "host"):
        pools[role] = [n.name for n in plan.nodes if n.role and n.role.value == role]
    rng, drawn = random.Random(seed), {}
    texts = [scenario.flow.src, scenario.flow.dst] + [
        s.do if s.do is not None else s.expect.hosts_avoid_plane or "" for s in scenario.steps]
    for text in texts:
        for found in CHOICE.finditer(text):
            name, kind = found.group(0), found.group(1)
            if name in drawn:
                continue
            left = [x for x in pools[kind] if x not in drawn.values()]
            if not left:
                raise LabError(f"lab {plan.name} has no {kind} left for {name}")
            drawn[name] = rng.choice(left)
    return drawn


@dataclass
class Verdict:
    at_s: float
    step: str
    ok: bool
    found: str
    seconds: float


class Run:
    """One run of a scenario on a lab, its choices drawn from `seed`."""

    def __init__(self, lab: Lab, scenario: Scenario, seed: int) -> None:
        self.lab, self.scenario, self.seed = lab, scenario, seed
        self.drawn = choices(lab.plan, scenario, seed)
        self.faults = Faults(lab)
        self.verdicts: list[Verdict] = []

    def fill(self, text: str) -> str:
        return CHOICE.sub(lambda m: self.drawn[m.group(0)], text)

    def _say(self, verdict: Verdict) -> None:
        say(self.lab.dir, "scenario", "passed" if verdict.ok else "failed", None,
            scenario=self.scenario.name, seed=self.seed, step=verdict.step, found=verdict.found)

    def _step(self, step: Step) -> None:
        started = time.monotonic()
        try:
            found = self._expect(step.expect) if step.expect else self._do(self.fill(step.do))
            ok = True
        except (LabError, NotReady) as exc:
            ok, found = False, str(exc).splitlines()[0][:300]
        verdict = Verdict(_seconds(step.at), self.fill(step.text()), ok, found,
                          time.monotonic() - started)
        self.verdicts.append(verdict)
        self._say(verdict)

    def _do(self, command: str) -> str:
        words = shlex.split(command)
        verb = catalog().verbs[words[0]]
        parser = argparse.ArgumentParser(prog=words[0], exit_on_error=False)
        verb.arguments(parser)
        try:
            args = parser.parse_args(words[1:])
        except (argparse.ArgumentError, SystemExit) as exc:
            raise LabError(f"{command}: {exc}") from None
        return str(verb.call(self.faults, args))

    def _expect(self, expect: Expect) -> str:
        within = _seconds(expect.within)
        started = time.monotonic()
        if expect.converged:
            wait_converged(self.lab, within)
        else:
            hosts = [h.name for h in spraying_hosts(self.lab.plan)]
            out = set() if expect.hosts_use_all_planes else {
                int(self.fill(expect.hosts_avoid_plane or ""))}
            wait_spray(self.lab, {(a, b): all_planes(self.lab, a) - out
                                  for a in hosts for b in hosts if a != b}, timeout=within)
        return f"in {(time.monotonic() - started) * 1000:.0f} ms"

    def run(self) -> list[Verdict]:
        flow, steps = self.scenario.flow, [s for s in self.scenario.steps if s.enabled]
        seconds = flow.seconds or max(_seconds(s.at) for s in steps) + TAIL_S
        say(self.lab.dir, "scenario", "started", None, scenario=self.scenario.name,
            seed=self.seed, drawn=self.drawn)
        try:
            result = run_flow(self.lab, self.fill(flow.src), self.fill(flow.dst),
                              rate_pps=flow.rate_pps, count=round(flow.rate_pps * seconds),
                              actions=[(_seconds(s.at), s.text(), lambda s=s: self._step(s))
                                       for s in steps])
        finally:
            self.faults.undo_all()
            wait_converged(self.lab, SETTLE_S)
        if flow.outage_below is not None:
            bound_ms = _seconds(flow.outage_below) * 1000
            verdict = Verdict(seconds, f"flow {result.src} -> {result.dst} outage below "
                              f"{flow.outage_below}", result.outage_ms < bound_ms,
                              f"{result.outage_ms:.1f} ms, {result.lost} of {result.sent} lost",
                              result.duration_s)
            self.verdicts.append(verdict)
            self._say(verdict)
        return self.verdicts


def write_junit(path: Path, scenario: Scenario, seed: int, verdicts: list[Verdict]) -> None:
    name = f"{scenario.name}[seed={seed}]"
    write_suite(path, name, [Case(name, f"{v.at_s:g}s {v.step}", v.seconds,
                                  failure=None if v.ok else v.found, detail=v.found)
                             for v in verdicts])
