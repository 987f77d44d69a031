#!/usr/bin/env python3
"""Every shipped lab in turn, as the nightly runs them: deploy (how long it took to build and
to converge), validate (the default profile: latency, bandwidth, collectives), then break it
under a flow and measure the outage of each fault type (a transit link down, the switch
behind it crashed, its BGP session reset; a plane down where hosts spray). A lab that fails
keeps its evidence (harness/faults/evidence.py) before it is destroyed.

Writes REPORT_DIR/labs.json and REPORT_DIR/labs.xml (JUnit: a test case per lab and stage).

    sudo .venv/bin/python bench/labs.py --report-dir DIR [--labs clos,fpf-mini]
        [--raise-neighbour-limits]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.core.build import REPO
from harness.core.errors import FabricLabError
from harness.deploy.converge import wait_converged
from harness.deploy.lab import Lab, destroy_lab
from harness.deploy.stages import Progress
from harness.faults import Faults, evidence
from harness.linux.features import neighbour_room
from harness.spray.nic import spraying_hosts, wait_spray
from harness.testing.junit import Case, write_suite
from harness.testing.report import fault_records
from harness.topology.pipeline import plan_from_file
from harness.topology.schema import Role
from harness.traffic.flow import run_flow
from harness.validation.checks import judge_all
from harness.validation.profile import load_profile
from harness.validation.run import spread, validate

TOPOLOGIES = REPO / "topologies"
RATE_PPS, COUNT, FAULT_AT_S = 1000, 3000, 1.0  # 3 s of flow, the fault 1 s in
RECOVER_S = 120.0


def _distances(links: dict[str, set[str]], start: str, without: str = "",
               cut: tuple[str, str] | None = None) -> dict[str, int]:
    seen, frontier = {start: 0}, [start]
    while frontier:
        node = frontier.pop(0)
        for peer in links[node] - seen.keys() - {without}:
            if cut and {node, peer} == set(cut):
                continue
            seen[peer] = seen[node] + 1
            frontier.append(peer)
    return seen


def redundant_hop(lab: Lab, src: str, dst: str) -> tuple[str, str, bool] | None:
    """A hop (near, far, far can fail) on a shortest path from src to dst, as near dst as can
    be, that the lab can lose and still join src to dst: a fault there is one the fabric is
    built to survive. One whose far node can go too comes first, then hops between switches
    (a NIC's own link only where no other is)."""
    links: dict[str, set[str]] = {n.name: set() for n in lab.plan.nodes}
    for link in lab.plan.links:
        links[link.a.node].add(link.b.node)
        links[link.b.node].add(link.a.node)
    from_src, from_dst = _distances(links, src), _distances(links, dst)
    if dst not in from_src:
        return None
    hosts = {n.name for n in lab.plan.nodes if n.role is Role.host}
    hops = [(near, far, dst in _distances(links, src, without=far))
            for far in links for near in links[far]
            if far in from_src and near in from_dst and far not in hosts
            and from_src[far] + 1 + from_dst[near] == from_src[dst]
            and dst in _distances(links, src, cut=(near, far))]
    hops.sort(key=lambda hop: (not hop[2], hop[0] in hosts, from_dst[hop[0]]))
    return hops[0] if hops else None


def fault_round(lab: Lab, src: str, dst: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Each fault under its own flow src -> dst, undone and reconverged before the next."""
    found = redundant_hop(lab, src, dst)
    if found is None:
        return [], [f"{lab.plan.name}: no link between {src} and {dst} can fail without "
                    "cutting them apart: no fault round"]
    edge, uplink, can_crash = found
    kinds: list[tuple[str, Callable[[Faults], object]]] = [
        ("link_down", lambda f: f.link_down(f"{edge}--{uplink}")),
        ("bgp_reset", lambda f: f.bgp_reset(edge, uplink))]
    if can_crash:
        kinds.insert(1, ("node_crash", lambda f: f.node_crash(uplink)))
    plane = lab.plan.node(uplink).plane
    if spraying_hosts(lab.plan) and plane is not None:
        kinds.insert(0, ("plane_down", lambda f: f.plane_down(plane)))
    records = []
    for kind, inject in kinds:
        faults = Faults(lab)
        flow = run_flow(lab, src, dst, count=COUNT, rate_pps=RATE_PPS,
                        actions=[(FAULT_AT_S, kind, lambda i=inject, f=faults: i(f))])
        faults.undo_all()
        wait_converged(lab, RECOVER_S)
        if spraying_hosts(lab.plan):
            wait_spray(lab, timeout=RECOVER_S)
        records += [{**r, "lab": lab.plan.name, "kind": kind} for r in
                    fault_records(f"nightly::{lab.plan.name}", faults.history, [flow], "passed")]
    return records, []


def one_lab(topology: Path, report: Path, raise_limits: bool) -> tuple[dict[str, Any], list[Case]]:
    plan = plan_from_file(topology)
    name, cases = plan.name, []
    result: dict[str, Any] = {"lab": name, "topology": topology.name, "nodes": len(plan.nodes)}
    room = neighbour_room(plan)
    if room and not raise_limits:
        result["skipped"] = f"{room} (the nightly's --raise-neighbour-limits deploys it)"
        cases.append(Case(name, "deploy", 0.0, skipped=result["skipped"]))
        return result, cases
    destroy_lab(name)
    lab = Lab(plan)
    stages: dict[str, float] = {}
    stage = "deploy"
    began = time.monotonic()
    try:
        lab.deploy(Progress(stage=lambda s, total: stages.setdefault(s, time.monotonic())),
                   raise_neighbour_limits=raise_limits)
        ended = time.monotonic()
        result["deploy_s"] = round(ended - began, 2)
        result["converge_s"] = round(ended - stages.get("converging", began), 2)
        if spraying_hosts(plan):
            wait_spray(lab)
        cases.append(Case(name, "deploy", ended - began))
        hosts = spread(lab)
        if len(hosts) >= 2:
            stage, began = "validate", time.monotonic()
            profile = load_profile()
            validation = validate(lab, profile)
            verdicts = judge_all(profile, validation)
            result["validation"] = {**validation.to_dict(),
                                    "checks": [v.__dict__ for v in verdicts]}
            failed = [v.check for v in verdicts if not v.ok]
            cases.append(Case(name, "validate", time.monotonic() - began,
                              failure="; ".join(failed) or None))
            stage, began = "faults", time.monotonic()
            result["faults"], result["notes"] = fault_round(lab, hosts[0], hosts[1])
            cases.append(Case(name, "faults", time.monotonic() - began))
        if any(c.failure for c in cases):
            result["evidence"] = str(evidence.archive(lab, report / "evidence" / "labs" / name))
    except (FabricLabError, OSError, TimeoutError) as exc:
        cases.append(Case(name, stage, time.monotonic() - began,
                          failure=f"{exc}", detail=traceback.format_exc()))
        result["error"] = f"{stage}: {exc}"
        result["evidence"] = str(evidence.archive(lab, report / "evidence" / "labs" / name))
    finally:
        lab.destroy()
    return result, cases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report-dir", type=Path, required=True)
    parser.add_argument("--labs", help="comma-separated lab files' names (default: every one "
                        "in topologies/)")
    parser.add_argument("--raise-neighbour-limits", action="store_true",
                        help="deploy labs the host's neighbour tables cannot hold by raising "
                        "them for the run (as labctl deploy --raise-neighbour-limits)")
    args = parser.parse_args()
    files = sorted(TOPOLOGIES.glob("*.yml"))
    if args.labs:
        wanted = args.labs.split(",")
        files = [f for f in files if f.stem in wanted]
        if len(files) != len(wanted):
            sys.exit(f"unknown lab(s) in {args.labs}; topologies/ has "
                     f"{', '.join(f.stem for f in sorted(TOPOLOGIES.glob('*.yml')))}")
    args.report_dir.mkdir(parents=True, exist_ok=True)
    results, cases = [], []
    for topology in files:
        print(f"labs: {topology.stem} ...", flush=True)
        result, lab_cases = one_lab(topology, args.report_dir, args.raise_neighbour_limits)
        results.append(result)
        cases += lab_cases
        print(f"labs: {topology.stem}: " + ", ".join(
            f"{c.stage} {'FAILED: ' + c.failure if c.failure else 'skipped' if c.skipped else 'ok'}"
            f" ({c.seconds:.1f} s)" for c in lab_cases), flush=True)
    (args.report_dir / "labs.json").write_text(json.dumps({"labs": results}, indent=1) + "\n")
    write_suite(args.report_dir / "labs.xml", "nightly.labs", cases)
    return 1 if any(c.failure for c in cases) else 0


if __name__ == "__main__":
    sys.exit(main())
