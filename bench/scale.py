#!/usr/bin/env python3
"""How an FPF lab's cost grows with its size, up to the largest this machine converges.

Deploys FPF labs of growing size (8 planes, SAI switches, BFD 100 ms x 3 on every session, the
shape of fpf-64: up to 16 hosts per leaf, one spine per two leaves) one after the other, and
prints per size: nodes, BGP session ends (two per session), deploy-to-converged time, RSS and
PSS per node, CPU while the converged lab idles, and how long `labctl inspect` takes (median
of five runs; below each row: the BGP keepalive and hold time and the BFD interval the lab's
size gave it (harness/topology/bgp_timers.py), how many BGP session ends went down since the
deploy began (none should), how often each node's BFD engine wakes while the lab idles, and
the ARP and ND entries the host's neighbour tables hold for it). Then the growth
exponent of each (the slope of log cost over log nodes between the sizes that converged: 1 is
linear). It stops at the first size that does not converge within --timeout
and prints what stopped it.

With `--bfd offload bfdd` the sizes run once per BFD engine, so each node's fl-bfd is measured
against bfdd's own packet loop in the same run (harness/nodes/bfd); `--share-memory on off`
likewise runs them with and without KSM merging what the nodes hold alike (the default, auto,
shares from about 100 FRR nodes on a 24 GiB host: harness/linux/ksm.py). Memory is shown
twice: PSS per node (the processes' own pages, merged ones split among their sharers) and
what the host gave the lab per node (the fall in MemAvailable, kernel state included).
`--host-echo 50ms` adds BFD echo on the host links, as `labctl gen fpf --host-echo` does.
`--nodes 500` runs fpf-64 and the smallest FPF of this shape with at least 500 nodes, and
prints `N nodes ... converged in S s`. Below every row: how long each deploy stage took
(nodes, links, addresses, impairments, host NICs, start, exec, converging), and the CPU
seconds each stage cost by command (Python by module; `(reaped children)` is what the deploy's
own commands used, FRR's start before its daemons detach and vtysh among them): where a big
lab spends its time.

    sudo .venv/bin/python bench/scale.py [--hosts 4 8 16 32 64 | --nodes 500] [--bfd offload bfdd]
                                         [--share-memory auto] [--host-echo 50ms]
                                         [--idle 10] [--timeout 240] [--no-settle]
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.core.errors import FabricLabError  # noqa: E402
from harness.core.wait import wait_until  # noqa: E402
from harness.deploy.lab import Lab  # noqa: E402
from harness.deploy.stages import Progress  # noqa: E402
from harness.fabrics.fpf import BFD_ENGINES, FpfParams, plan  # noqa: E402
from harness.linux import ksm  # noqa: E402
from harness.linux.features import NEIGHBOUR_TABLES, neighbour_limit_raised  # noqa: E402
from harness.nodes.bfd.offload import ENGINE  # noqa: E402
from harness.testing.footprint import (  # noqa: E402
    CpuUsed,
    cpu_between,
    cpu_used,
    footprint,
    node_process,
)

HOSTS_PER_LEAF = 16  # fpf-64's
FPF_64_HOSTS = 64
INSPECT_RUNS = 5
WAKES_WINDOW_S = 5.0
COLUMNS = ("nodes", "session ends", "converged (s)", "RSS/node (MiB)", "PSS/node (MiB)",
           "host/node (MiB)", "idle CPU (cores)", "inspect (s)")


def params(hosts: int, bfd: str, host_echo: str | None = None) -> FpfParams:
    leaves = max(2, math.ceil(hosts / HOSTS_PER_LEAF))
    return FpfParams(leaves_per_plane=leaves, spines_per_plane=max(1, leaves // 2),
                     hosts=hosts, name=f"scale{hosts}", bfd=bfd, host_echo=host_echo)


def hosts_for(nodes: int) -> int:
    """The fewest hosts (whole leaves of them) whose lab has at least `nodes` nodes."""
    hosts = HOSTS_PER_LEAF
    while len(plan(params(hosts, BFD_ENGINES[0])).nodes) < nodes:
        hosts += HOSTS_PER_LEAF
    return hosts


def measure(hosts: int, bfd: str, share: str, host_echo: str | None, idle_s: float,
            timeout: float, settle: bool) -> tuple[dict[str, Any], dict[str, float]]:
    """The row of one size, and its idle CPU per command."""
    available = ksm.mem_available_mib()
    before = {t.afi: t.in_use() for t in NEIGHBOUR_TABLES}
    lab = Lab(plan(params(hosts, bfd, host_echo)), share_memory=share)
    started: list[tuple[str, float, CpuUsed]] = []
    progress = Progress(stage=lambda name, _: started.append(
        (name, time.monotonic(), cpu_used())))
    start = time.monotonic()
    with neighbour_limit_raised(lab.plan, str(lab.dir)):
        try:
            converged = lab.deploy(progress, timeout=timeout)
            seconds = time.monotonic() - start
            ends = [(t, cpu) for _, t, cpu in started[1:]] + [(start + seconds, cpu_used())]
            stages = {name: end - t for (name, t, _), (end, _) in zip(started, ends, strict=True)}
            stage_cpu = {name: cpu_between(cpu, after) for (name, _, cpu), (_, after)
                         in zip(started, ends, strict=True)}
            merged_s = wait_merged(timeout) if lab.plan.share_memory and settle else 0.0
            cost = footprint(lab, lab.node_names, idle_s)
            host_mib = available - ksm.mem_available_mib()
            wakes = engine_wakes_per_second(lab, WAKES_WINDOW_S) if bfd == "offload" else 0.0
            neighbours = {t.afi: t.in_use() - before[t.afi] for t in NEIGHBOUR_TABLES}
            inspect_s = time_inspect(lab.plan.name)
            dropped = sessions_dropped(lab)
        finally:
            lab.destroy()
    n = len(lab.plan.nodes)
    return {**dict(zip(COLUMNS, (n, converged.sessions_total, seconds, cost.rss_mib / n,
                                 cost.pss_mib / n, host_mib / n, cost.cpu_cores, inspect_s),
                       strict=True)),
            "dropped": dropped, "keepalive": lab.plan.keepalive, "hold": lab.plan.hold,
            "bfd_ms": lab.plan.bfd.interval_ms if lab.plan.bfd else 0,
            "stages": stages, "stage_cpu": stage_cpu,
            "shared": lab.plan.share_memory, "merged_s": merged_s, "wakes": wakes,
            "arp": neighbours["ipv4"], "nd": neighbours["ipv6"]}, cost.cpu_by_command


def engine_wakes_per_second(lab: Lab, seconds: float) -> float:
    """How often each node's BFD engine slept and woke again while the lab idles (its
    voluntary context switches), the mean over the nodes."""
    def switches() -> dict[int, int]:
        counts = {}
        for node in lab.node_names:
            with contextlib.suppress(LookupError, OSError):
                pid = node_process(lab, node, ENGINE)
                status = Path(f"/proc/{pid}/status").read_text()
                counts[pid] = int(status.split("voluntary_ctxt_switches:")[1].split()[0])
        return counts
    before = switches()
    time.sleep(seconds)
    after = switches()
    engines = [after[pid] - before[pid] for pid in after.keys() & before.keys()]
    return statistics.mean(engines) / seconds if engines else 0.0


def wait_merged(timeout: float) -> float:
    """Seconds until KSM has been through all mergeable memory twice more since the lab
    converged (a page merges on the second scan that finds it unchanged): memory and idle CPU
    are measured as they stay, not while ksmd is still catching up."""
    start, scans = time.monotonic(), ksm.full_scans()
    wait_until(lambda: ksm.full_scans() >= scans + 2, timeout, lambda _: FabricLabError(
        f"KSM did not scan the lab's memory twice in {timeout:.0f} s"), every=1)
    return time.monotonic() - start


def sessions_dropped(lab: Lab) -> int:
    """BGP session ends that went down at least once since the deploy began: each should have
    come up once and stayed up (a drop is a flap the deploy or the idle lab caused)."""
    return sum(dropped > 0 for node in lab.node_names
               for _, dropped in lab.frr(node).bgp_connections().values())


def time_inspect(lab: str) -> float:
    """`labctl inspect` as an operator runs it (a fresh process, the table printed): the
    median of a few runs, as one run on a busy lab varies by a third."""
    def once() -> float:
        start = time.monotonic()
        subprocess.run([sys.executable, "-m", "harness.cli", "inspect", lab], check=True,
                       stdout=subprocess.DEVNULL, cwd=REPO)
        return time.monotonic() - start

    return statistics.median(once() for _ in range(INSPECT_RUNS))


def cpu_breakdown(stage: str, seconds: float, cpu: Counter[str]) -> str:
    """Where a stage's CPU went: the commands that took a fiftieth of it or more."""
    total = sum(v for v in cpu.values() if v > 0)
    top = [(c, v) for c, v in cpu.most_common() if v >= max(0.02 * total, 0.05)]
    return (f"{stage}: {total:.1f} CPU s in {seconds:.1f} s" + (": " if top else "")
            + ", ".join(f"{c} {v:.1f}" for c, v in top))


def exponent(sizes: list[float], costs: list[float]) -> float:
    """Least-squares slope of log(cost) over log(size)."""
    xs, ys = [math.log(s) for s in sizes], [math.log(c) for c in costs]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return (sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
            / sum((x - mx) ** 2 for x in xs))


def run_sizes(hosts: list[int], bfd: str, share: str, host_echo: str | None, idle_s: float,
              timeout: float, settle: bool) -> None:
    echo = f", echo every {host_echo} on host links" if host_echo else ""
    print(f"BFD in {bfd}{echo}, --share-memory {share}:\n{'hosts':>6} "
          + " ".join(f"{c:>16}" for c in COLUMNS), flush=True)
    rows: list[dict[str, Any]] = []
    idle_by_command: dict[str, float] = {}
    for n in sorted(hosts):
        try:
            row, idle_by_command = measure(n, bfd, share, host_echo, idle_s, timeout, settle)
        except FabricLabError as exc:
            print(f"{n:>6} did not converge within {timeout:.0f} s: {exc}")
            break
        rows.append(row)
        print(f"{n:>6} " + " ".join(f"{row[c]:>16.2f}" for c in COLUMNS), flush=True)
        merged = (f" (measured once merged, {row['merged_s']:.0f} s later)" if settle else
                  " (measured at once, ksmd still merging)") if row["shared"] else ""
        print(f"{'':>6} memory {'shared' + merged if row['shared'] else 'not shared'}; BGP timers "
              f"{row['keepalive']:.0f} s / {row['hold']:.0f} s, BFD every {row['bfd_ms']:.0f} ms; "
              f"session ends dropped since the deploy began: {row['dropped']:.0f}; BFD engines "
              f"woke {row['wakes']:.1f} times a second each; neighbour entries: "
              f"ARP {row['arp']:.0f}, ND {row['nd']:.0f}")
        print(f"{'':>6} {row['nodes']:.0f} nodes, {row['session ends']:.0f} session ends, "
              f"converged in {row['converged (s)']:.1f} s: " + ", ".join(
                  f"{name} {took:.1f} s" for name, took in row["stages"].items()), flush=True)
        for name, cpu in row["stage_cpu"].items():
            print(f"{'':>6} {cpu_breakdown(name, row['stages'][name], cpu)}", flush=True)
    if rows:
        print(f"idle CPU of the {rows[-1]['nodes']:.0f}-node lab by command (cores): " + ", ".join(
            f"{c} {v:.2f}" for c, v in idle_by_command.items() if v >= 0.005))
    if len(rows) >= 2:
        nodes = [r["nodes"] for r in rows]
        print("growth exponent over nodes (1 = linear): " + ", ".join(
            f"{c} {exponent(nodes, [r[c] for r in rows]):.2f}" for c in COLUMNS[1:]))
    cores = os.cpu_count() or 1
    saturated = [r for r in rows if r["idle CPU (cores)"] >= 0.9 * cores]
    if saturated:
        print(f"idle CPU reaches {cores} cores (all of them) from {saturated[0]['nodes']:.0f} "
              "nodes on: its exponent understates the growth, and convergence slows down")
    if rows:
        print(f"largest that converged: {rows[-1]['nodes']:.0f} nodes")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sizes = parser.add_mutually_exclusive_group()
    sizes.add_argument("--hosts", type=int, nargs="+", default=[4, 8, 16, 32, 64])
    sizes.add_argument("--nodes", type=int, metavar="N",
                       help="fpf-64, then the smallest lab of its shape with at least N nodes")
    parser.add_argument("--bfd", choices=BFD_ENGINES, nargs="+", default=[BFD_ENGINES[0]])
    parser.add_argument("--share-memory", choices=ksm.CHOICES, nargs="+", default=["auto"])
    parser.add_argument("--host-echo", metavar="INTERVAL",
                        help="BFD echo on host links, as `labctl gen fpf --host-echo`")
    parser.add_argument("--idle", type=float, default=10.0, metavar="S")
    parser.add_argument("--timeout", type=float, default=240.0, metavar="S")
    parser.add_argument("--no-settle", dest="settle", action="store_false",
                        help="measure memory and idle CPU once converged, without waiting for "
                             "KSM's two scans (at 504 nodes they take ~25 minutes)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/scale.py needs root")
    hosts = [FPF_64_HOSTS, hosts_for(args.nodes)] if args.nodes else args.hosts
    for bfd in args.bfd:
        for share in args.share_memory:
            run_sizes(hosts, bfd, share, args.host_echo, args.idle, args.timeout,
                      args.settle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
