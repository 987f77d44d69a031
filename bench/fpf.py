"""FPF at scale: deploy fpf-64 with FRR, then fail planes and measure what traffic sees.

Reports deploy time (against fpf-mini deployed in the same run, per node), RSS per node,
time to full convergence (every BGP session, every loopback route, every host spraying on
all planes), and the plane-failover outage of a sprayed flow over N trials (median, p95)
against the BFD detection times the fabric is configured with.

If the topology does not deploy on this machine (fpf-64 saturates 2 cores: 112 nodes, 2304
BFD sessions), the bench says where and why, then measures the baseline lab instead.

IPv6 neighbour tables are limited host-wide (net.ipv6.neigh.default.gc_thresh3, 1024 by
default, shared by all namespaces); a lab with more IPv6 neighbours than that cannot bring up
its IPv6 sessions, so the bench raises the limit for its run and restores it afterwards.

Usage: .venv/bin/python bench/fpf.py [--trials 20] [--topology topologies/fpf-64.yml]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import defaultdict
from pathlib import Path

from harness.deploy.stages import Progress
from harness.errors import LabError
from harness.faults import Faults
from harness.kernel import neighbour_limit_raised
from harness.lab import Lab, destroy_lab
from harness.spray.control import spraying_hosts, wait_spray
from harness.stats import percentile
from harness.testing import plan_from
from harness.testing.footprint import memory_mib
from harness.topology.plan import LabPlan
from harness.traffic.flow import run_flow

ROOT = Path(__file__).resolve().parents[1]
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


def failover_trials(lab: Lab, trials: int) -> list[dict[str, float]]:
    hosts = [n.name for n in spraying_hosts(lab.plan)]
    src, dst = hosts[0], hosts[-1]  # first and last leaf: every plane's path crosses a spine
    planes = sorted({n.plane for n in lab.plan.nodes if n.plane is not None})
    faults = Faults(lab)
    results = []
    try:
        for trial in range(trials):
            plane = planes[trial % len(planes)]
            flow = run_flow(lab, src, dst, rate_pps=2000, count=5000,
                            actions=[(1.0, "down", lambda p=plane: faults.plane_down(p))])
            back = time.monotonic()
            faults.plane_up(plane)
            wait_spray(lab, {(src, dst): set(planes)}, timeout=120)
            results.append({"plane": plane, "outage_ms": flow.outage_ms, "lost": flow.lost,
                            "sent": flow.sent, "rejoin_s": time.monotonic() - back})
            print(f"  trial {trial + 1:2}: plane {plane} down: outage {flow.outage_ms:6.1f} ms, "
                  f"{flow.lost} of {flow.sent} lost; back on all planes after "
                  f"{results[-1]['rejoin_s']:.1f} s", flush=True)
            wait_spray(lab, timeout=120)
    finally:
        faults.undo_all()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
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

    plan = plan_from(args.topology, name="fpf-bench")
    try:
        with neighbour_limit_raised(plan):
            lab, marks = deploy(plan)
    except DeployFailed as failed:
        print(f"TOO HEAVY FOR THIS MACHINE: {failed}")
        plan = plan_from(args.baseline, name="fpf-bench-base")
        print(f"measuring the baseline {Path(args.baseline).name} instead")
        lab, marks = deploy(plan)
    try:
        total = marks["spraying on all planes"]
        print(f"{plan.name}: {len(plan.nodes)} nodes, {len(plan.links)} links, "
              f"{len(plan.sessions)} BGP sessions (one direction each)")
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
    print(f"plane failover over {len(outages)} trials: median {median:.1f} ms, p95 {p95:.1f} ms, "
          f"max {max(outages):.1f} ms")
    print(f"  vs BFD echo detection {echo_ms} ms: median {median / echo_ms:.2f}x, "
          f"p95 {p95 / echo_ms:.2f}x; vs control detection {control_ms} ms: "
          f"median {median / control_ms:.2f}x, p95 {p95 / control_ms:.2f}x")
    print(f"  rejoin after plane up: median "
          f"{statistics.median(r['rejoin_s'] for r in results):.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
