"""FPF: plane failover as traffic sees it on fpf-mini, with and without the hosts' data-plane
probes; then fpf-64 with FRR, deployed and failed the same way.

On fpf-mini (under CPU load: --busy spinning processes, one by default), for `plane_down`
(links up, the plane drops everything) and a leaf crash: the outage of a sprayed flow over
N trials (median, p95), once with the probes (harness/spray/probe.py) and once with BFD and
BGP alone, from the same run. Then a gray plane (5% loss): how long until it is drained and,
once clean, back; and how often uniform background loss on every plane drains one anyway
(the false-positive rate).

On fpf-64: deploy time (against fpf-mini deployed in the same run, per node), RSS per node,
time to full convergence (every BGP session, every loopback route, every host spraying on
all planes), and the plane-failover outage over N trials against the BFD detection times.

If the topology does not deploy on this machine (fpf-64 is 112 nodes and 1,152 BFD session
ends at 100 ms on 2 cores), the bench says where and why, then measures the baseline lab
instead.

The kernel's neighbour tables (ARP and IPv6 ND) are limited host-wide (gc_thresh3, 1024 by
default, shared by all namespaces); a lab with more neighbours than that cannot bring up its
sessions, so the bench raises the limits for its run and restores them afterwards.

Usage: .venv/bin/python bench/fpf.py [--trials 20] [--busy 1] [--skip-big]
                                     [--topology topologies/fpf-64.yml]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from harness.core.errors import LabError
from harness.core.paths import lab_dir
from harness.core.stats import percentile
from harness.deploy.converge import wait_converged
from harness.deploy.lab import Lab, destroy_lab
from harness.deploy.stages import Progress
from harness.faults import Faults
from harness.instruments.resources import memory_mib
from harness.linux.features import neighbour_limit_raised
from harness.spray.nic import LOG_FILE, probe_timing, read_spray, spraying_hosts, wait_spray
from harness.testing import plan_from
from harness.testing.footprint import footprint
from harness.testing.load import busy_cpus
from harness.topology.plan import LabPlan
from harness.traffic.flow import run_flow

ROOT = Path(__file__).resolve().parents[1]
IDLE_S = 10.0  # CPU of the converged lab measured over this long
class DeployFailed(Exception):
    pass


def deploy(plan: LabPlan) -> tuple[Lab, dict[str, float]]:
    """Deploy and time each stage; 'converged' includes every host spraying on all planes."""
    destroy_lab(plan.name)
    lab = Lab(plan)
    marks: dict[str, float] = {}
    start = time.monotonic()
    try:
        lab.deploy(Progress(stage=lambda name, total: marks.setdefault(name, time.monotonic())),
                   timeout=900)
    except LabError as exc:
        stage = max(marks, key=marks.get) if marks else "start"
        raise DeployFailed(f"{plan.name} ({len(plan.nodes)} nodes) failed in stage {stage!r} "
                           f"after {time.monotonic() - start:.0f} s, load average "
                           f"{os.getloadavg()[0]:.0f} on {os.cpu_count()} cores: "
                           f"{str(exc).splitlines()[0]}") from exc
    marks["bgp+fib converged"] = time.monotonic()
    wait_spray(lab, timeout=300)
    marks["spraying on all planes"] = time.monotonic()
    return lab, {k: v - start for k, v in marks.items()}


def ends_and_planes(lab: Lab) -> tuple[str, str, list[int]]:
    """The first and last spraying host (first and last leaf: every plane's path crosses a
    spine), and the lab's planes."""
    hosts = [n.name for n in spraying_hosts(lab.plan)]
    return hosts[0], hosts[-1], sorted({n.plane for n in lab.plan.nodes if n.plane is not None})


def trial_fault(lab: Lab, faults: Faults, kind: str, src: str, plane: int) -> Callable[[], object]:
    """plane_down: the whole plane drops everything; leaf_crash: src's leaf on the plane."""
    if kind == "plane_down":
        return lambda: faults.plane_down(plane)
    leaf = next(lab.plan.node(i.peer.node) for i in lab.plan.node(src).interfaces
                if lab.plan.node(i.peer.node).plane == plane)
    return lambda: faults.node_crash(leaf.name)


def failover_trials(lab: Lab, trials: int, kind: str = "plane_down") -> list[dict[str, float]]:
    src, dst, planes = ends_and_planes(lab)
    faults = Faults(lab)
    results = []
    try:
        for trial in range(trials):
            plane = planes[trial % len(planes)]
            flow = run_flow(lab, src, dst, rate_pps=2000, count=4000,
                            actions=[(1.0, kind, trial_fault(lab, faults, kind, src, plane))])
            back = time.monotonic()
            faults.undo_all()
            wait_converged(lab, 300)
            wait_spray(lab, {(src, dst): set(planes)}, timeout=120)
            results.append({"plane": plane, "outage_ms": flow.outage_ms, "lost": flow.lost,
                            "sent": flow.sent, "rejoin_s": time.monotonic() - back})
            print(f"  trial {trial + 1:2}: {kind} on plane {plane}: outage "
                  f"{flow.outage_ms:6.1f} ms, {flow.lost} of {flow.sent} lost; back on all "
                  f"planes after {results[-1]['rejoin_s']:.1f} s", flush=True)
            wait_spray(lab, timeout=120)
    finally:
        faults.undo_all()
    return results


def summary(outages: list[float]) -> str:
    return (f"median {statistics.median(outages):6.1f} ms, p95 {percentile(outages, 95):6.1f} ms, "
            f"max {max(outages):6.1f} ms")


def gray_trials(lab: Lab, trials: int, loss_pct: float = 5.0) -> None:
    """A plane losing `loss_pct`: time until src no longer sprays into it, and until it is
    back once clean (no traffic needed: the probes are the evidence)."""
    src, dst, planes = ends_and_planes(lab)
    faults = Faults(lab)
    drained, restored = [], []
    try:
        for trial in range(trials):
            plane = planes[trial % len(planes)]
            fault = faults.plane_loss(plane, loss_pct)
            wait_spray(lab, {(src, dst): set(planes) - {plane}}, timeout=30)
            view = read_spray(lab, src)
            assert view is not None
            _, switched_ns = view.switched_ns[lab.plan.node(dst).loopback4]
            drained.append((switched_ns - fault.injected_ns) / 1e6)
            faults.undo(fault)
            clean = time.monotonic()
            wait_spray(lab, {(src, dst): set(planes)}, timeout=30)
            restored.append(time.monotonic() - clean)
            print(f"  gray trial {trial + 1:2}: plane {plane} at {loss_pct:g}% loss drained "
                  f"after {drained[-1]:6.1f} ms; back {restored[-1]:.2f} s after it was clean",
                  flush=True)
            wait_spray(lab, timeout=60)
    finally:
        faults.undo_all()
    print(f"gray plane ({loss_pct:g}% loss) over {trials} trials: drained after "
          f"{summary(drained)}; back after median {statistics.median(restored):.2f} s, "
          f"max {max(restored):.2f} s of being clean")


def false_drains(lab: Lab, loss_pct: float, seconds: float) -> None:
    """Every plane loses `loss_pct` (uniform background loss, no plane worse than the
    others): count the planes the probes drain anyway (towards one peer or towards every
    destination), from the engines' verdict logs."""
    hosts = [n.name for n in spraying_hosts(lab.plan)]
    *_, planes = ends_and_planes(lab)
    logs = [lab.node_dir(h) / LOG_FILE for h in hosts]
    marks = [log.stat().st_size for log in logs]
    faults = Faults(lab)
    try:
        for plane in planes:
            faults.plane_loss(plane, loss_pct)
        time.sleep(seconds)
    finally:
        faults.undo_all()
    drains = sum(" ok -> " in line or "drained towards every peer" in line
                 for log, mark in zip(logs, marks, strict=True)
                 for line in log.read_text()[mark:].splitlines())
    streams = len(hosts) * (len(hosts) - 1) * len(planes)
    print(f"background loss {loss_pct:g}% on every plane for {seconds:.0f} s: {drains} planes "
          f"drained wrongly over {streams} (peer, plane) streams "
          f"({drains / streams / seconds * 3600:.2f} per stream-hour)", flush=True)
    wait_spray(lab, timeout=60)


def probes_text(plan: LabPlan) -> str:
    schedule = probe_timing(plan)
    return schedule.describe(len(spraying_hosts(plan))) if schedule else "no probes"


def probe_comparison(base_plan: LabPlan, trials: int, busy: int) -> None:
    """fpf-mini with its probes, then with BFD and BGP alone: the same faults, same load."""
    variants = [("probes", base_plan),
                ("BFD only", base_plan.model_copy(update={"probes": None,
                                                          "name": "fpf-bench-bfd"}))]
    results: dict[tuple[str, str], list[float]] = {}
    for label, plan in variants:
        lab, _ = deploy(plan)
        try:
            idle = footprint(lab, lab.node_names, IDLE_S).cpu_cores
            print(f"{label}: {probes_text(plan)}; the lab idles at {idle:.2f} cores; trials "
                  f"with {busy} busy processes on {os.cpu_count()} cores")
            with busy_cpus(busy):
                for kind in ("plane_down", "leaf_crash"):
                    results[label, kind] = [r["outage_ms"] for r in
                                            failover_trials(lab, trials, kind)]
                if plan.probes:
                    gray_trials(lab, min(trials, 10))
                    for loss in (0.1, 1.0):
                        false_drains(lab, loss, 30)
        finally:
            lab.destroy()
    for kind in ("plane_down", "leaf_crash"):
        print(f"{kind} on {base_plan.name} over {trials} trials:")
        for label, _ in variants:
            print(f"  {label:<9} {summary(results[label, kind])}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--busy", type=int, default=1,
                        help="spinning processes during the fpf-mini trials (CI-like load)")
    parser.add_argument("--skip-big", action="store_true", help="fpf-mini only")
    parser.add_argument("--topology", default=str(ROOT / "topologies/fpf-64.yml"))
    parser.add_argument("--baseline", default=str(ROOT / "topologies/fpf-mini.yml"))
    args = parser.parse_args()

    base_plan = plan_from(args.baseline, name="fpf-bench-base")
    base, base_marks = deploy(base_plan)
    base.destroy()
    base_total = base_marks["spraying on all planes"]
    per_node_ms = base_total / len(base_plan.nodes) * 1000
    print(f"baseline {Path(args.baseline).name}: {len(base_plan.nodes)} nodes converged and "
          f"spraying in {base_total:.1f} s ({per_node_ms:.0f} ms/node)")
    probe_comparison(base_plan, args.trials, args.busy)
    if args.skip_big:
        return 0

    plan = plan_from(args.topology, name="fpf-bench")
    try:
        with neighbour_limit_raised(plan, str(lab_dir(plan.name))):
            lab, marks = deploy(plan)
    except DeployFailed as failed:
        print(f"TOO HEAVY FOR THIS MACHINE: {failed}")
        return 1
    try:
        total = marks["spraying on all planes"]
        print(f"{plan.name}: {len(plan.nodes)} nodes, {len(plan.links)} links, "
              f"{len(plan.sessions)} BGP sessions (one direction each); {probes_text(plan)}")
        for stage, at in marks.items():
            print(f"  {stage:<24} at {at:7.1f} s")
        print(f"  deploy per node: {total / len(plan.nodes) * 1000:.0f} ms = "
              f"{total / len(plan.nodes) / (base_total / len(base_plan.nodes)):.2f}x the baseline")
        by_role: dict[str, list[float]] = defaultdict(list)
        for node in plan.nodes:
            rss, _ = memory_mib(lab.runtime.node_processes(node.name))
            by_role[node.role.value].append(rss)
        for role, values in sorted(by_role.items()):
            print(f"  RSS per {role:<6} mean {statistics.mean(values):6.1f} MiB, "
                  f"max {max(values):6.1f} MiB ({len(values)} nodes)")
        print(f"  RSS all nodes: {sum(map(sum, by_role.values())) / 1024:.2f} GiB "
              "(shared pages counted per process)")
        results = failover_trials(lab, args.trials)
    finally:
        lab.destroy()
    outages = [r["outage_ms"] for r in results]
    bfd = plan.bfd
    assert bfd is not None
    control_ms = bfd.interval_ms * bfd.multiplier
    echo_ms = (bfd.host_echo_ms or bfd.interval_ms) * bfd.multiplier
    median, p95 = statistics.median(outages), percentile(outages, 95)
    print(f"{plan.name} plane failover over {len(outages)} trials: {summary(outages)}")
    print(f"  vs BFD echo detection {echo_ms} ms: median {median / echo_ms:.2f}x, "
          f"p95 {p95 / echo_ms:.2f}x; vs control detection {control_ms} ms: "
          f"median {median / control_ms:.2f}x, p95 {p95 / control_ms:.2f}x")
    print(f"  rejoin after plane up: median "
          f"{statistics.median(r['rejoin_s'] for r in results):.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
