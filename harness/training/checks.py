"""An exercise's checks, read off the running lab: what FRR, the SAI agents, the sprayers and
ping say now. Each says what it found, so a failed check points the trainee somewhere."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from harness.core.errors import LabError
from harness.core.wait import NotReady, wait_until
from harness.deploy.lab import Lab
from harness.faults.targets import select_nodes
from harness.nodes.switch.agent.client import ask
from harness.spray.nic import all_planes, planes_to_hosts, spraying_hosts
from harness.training.exercise import Check, Dampened, Reach, SaiRoutes, Sessions, Spray
from harness.training.template import Renderer

PINGS = 3


@dataclass(frozen=True)
class Result:
    check: str
    ok: bool
    found: str


def run_checks(lab: Lab, checks: Sequence[Check]) -> list[Result]:
    render = Renderer(lab.plan).render
    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(lambda c: _judge(lab, c, render), checks))


def _judge(lab: Lab, check: Check, render) -> Result:
    try:
        if isinstance(check, Sessions):
            return _sessions(lab, render(check.nodes))
        if isinstance(check, Spray):
            return _spray(lab)
        if isinstance(check, Reach):
            return _reach(lab, render(check.source), render(check.to), check.family)
        if isinstance(check, SaiRoutes):
            return _sai_routes(lab, render(check.nodes))
        assert isinstance(check, Dampened)
        return _dampened(lab, render(check.node), render(check.prefixes_of))
    except LabError as exc:  # a daemon not answering is what a trainee must see, not a trace
        return Result(check.check, False, str(exc))


def _sessions(lab: Lab, spec: str) -> Result:
    what = f"BGP sessions of {spec} Established"
    down = []
    for node in select_nodes(lab.plan, spec):
        if lab.plan.node(node).runs_frr:
            down += [f"{node}->{peer} {state}" for peer, state in
                     lab.frr(node).bgp_peer_states().items() if state != "Established"]
    return Result(what, not down, "; ".join(down) or "all Established")


def _spray(lab: Lab) -> Result:
    what = "every host sprays to every other over all its planes"
    missing = []
    for host in (n.name for n in spraying_hosts(lab.plan)):
        want = all_planes(lab, host)
        for peer, planes in planes_to_hosts(lab, host).items():
            if planes != want:
                missing.append(f"{host}->{peer} without plane(s) "
                               f"{','.join(map(str, sorted(want - planes)))}")
    return Result(what, not missing, "; ".join(missing[:4]) + (
        f" (and {len(missing) - 4} more)" if len(missing) > 4 else "") or "all planes")


def _reach(lab: Lab, source: str, spec: str, family: int) -> Result:
    targets = [n for n in select_nodes(lab.plan, spec) if n != source]
    what = f"{source} reaches {spec} (IPv{family} loopbacks)"

    def silent(target: str) -> str | None:
        node = lab.plan.node(target)
        address = node.loopback4 if family == 4 else node.loopback6
        out = lab.runtime.run(source, ["ping", f"-{family}", "-c", str(PINGS), "-i", "0.2",
                                       "-W", "1", "-q", str(address)], timeout=30)
        return None if out.returncode == 0 else f"{target} ({address}) silent"

    with ThreadPoolExecutor(max_workers=8) as pool:
        lost = [t for t in pool.map(silent, targets) if t]
    return Result(what, not lost, "; ".join(lost) or f"{len(targets)} answered")


def _sai_routes(lab: Lab, spec: str) -> Result:
    what = f"SAI agents of {spec} hold every route"
    failed = []
    for node in select_nodes(lab.plan, spec):
        status = ask(lab.node_dir(node), {"cmd": "status"})
        if status["routes_failed"]:
            reasons = sorted(set(status["routes_failed"].values()))
            failed.append(f"{node}: wants {status['routes_wanted']} routes, programmed "
                          f"{status['routes_programmed']} ({'; '.join(reasons)})")
    return Result(what, not failed, "; ".join(failed) or "none failed")


def _dampened(lab: Lab, node: str, spec: str) -> Result:
    prefixes = [f"{lab.plan.node(n).loopback4}/32" for n in select_nodes(lab.plan, spec)]
    what = f"{node} damps the routes of {spec}"
    shown = lab.frr(node).vtysh("show bgp ipv4 unicast dampening dampened-paths")
    free = [p for p in prefixes if p not in shown]
    return Result(what, not free, f"not suppressed: {', '.join(free)}" if free else
                  f"{len(prefixes)} suppressed")


def wait_checks(lab: Lab, checks: Sequence[Check], *, passing: bool,
                timeout: float) -> list[Result]:
    """Poll until every check passes (`passing`) or one fails; the last results either way."""
    try:
        return wait_until(lambda: run_checks(lab, checks), timeout, every=1.0,
                          until=lambda results: all(r.ok for r in results) == passing)
    except NotReady as late:
        return late.last
