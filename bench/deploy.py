#!/usr/bin/env python3
"""Deploy speed: labctl on its netns and docker runtimes against Mininet and a plain `ip`
shell script, same topology, same run.

Builds a ~100-node Clos (nodes + veth links + addresses, no routing daemons) each way, each as
a fresh process so interpreter start-up counts for everyone, and prints the ratios: goals
netns >= 3x faster than Mininet and within 2x of the shell floor, docker within 3x of netns
(docker runs when a dockerd answers and `make images` built this checkout's images), with
docker's own floor and what bounds it: the host CPU one bare container costs. Then
deploys the same topology with FRR on each runtime and prints deploy/convergence time and
memory per node (and on Mininet's, when it is installed).

Run as root: `make bench` (installs Debian's mininet) or `.venv/bin/python bench/deploy.py`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.core.errors import LabError  # noqa: E402
from harness.deploy.lab import Lab, destroy_lab  # noqa: E402
from harness.instruments.resources import command, memory_mib  # noqa: E402
from harness.linux import scratch  # noqa: E402
from harness.linux.cpu import IDLE, IOWAIT, TICK, cpu_s, machine_ticks  # noqa: E402
from harness.linux.nsenter import list_netns  # noqa: E402
from harness.linux.scratch import scratch_name  # noqa: E402
from harness.runtime import docker_engine, images  # noqa: E402
from harness.runtime.docker import CREATE_WORKERS, docker  # noqa: E402
from harness.topology.pipeline import plan_from_file  # noqa: E402
from harness.topology.plan import LabPlan  # noqa: E402

# As the mininet runtime builds it (harness/runtime/mininet_net.py): Mininet told its init
# ran, since that init (fixLimits) raises the host's ARP, socket-buffer and pty limits for good.
MININET_BUILD = r"""
import json, sys
from resource import RLIMIT_NOFILE
from mininet.net import Mininet
from mininet.log import setLogLevel
from mininet.util import rlimitTestAndSet
setLogLevel("error")
plan = json.load(open(sys.argv[1]))
Mininet.inited = True
rlimitTestAndSet(RLIMIT_NOFILE, 16384)
net = Mininet(topo=None, build=False, controller=None, autoSetMacs=False)
for n in plan["nodes"]:
    net.addHost(n["name"], ip=None)
for l in plan["links"]:
    net.addLink(l["a"]["node"], l["b"]["node"], intfName1=l["a"]["iface"],
                intfName2=l["b"]["iface"])
for n in plan["nodes"]:
    h = net.get(n["name"])
    for i in n["interfaces"]:
        h.cmd("ip addr add %s dev %s; ip -6 addr add %s dev %s; ip link set %s up"
              % (i["ipv4"], i["name"], i["ipv6"], i["name"], i["name"]))
print("built", flush=True)
sys.stdin.readline()
net.stop()
"""


def clos_yaml(spines: int, leaves: int, hosts_per_leaf: int) -> str:
    lines = ["name: benchdeploy", "topology:", "  nodes:"]
    lines += [f"    spine{s}: {{role: spine}}" for s in range(1, spines + 1)]
    lines += [f"    leaf{x}: {{role: leaf}}" for x in range(1, leaves + 1)]
    lines += [f"    h{x}x{h}: {{role: host}}" for x in range(1, leaves + 1)
              for h in range(1, hosts_per_leaf + 1)]
    lines.append("  links:")
    for x in range(1, leaves + 1):
        for s in range(1, spines + 1):
            lines.append(f'    - endpoints: ["leaf{x}:eth{s}", "spine{s}:eth{x}"]')
        for h in range(1, hosts_per_leaf + 1):
            lines.append(f'    - endpoints: ["h{x}x{h}:eth1", "leaf{x}:eth{spines + h}"]')
    return "\n".join(lines) + "\n"


def shell_script(plan: LabPlan) -> str:
    ns = {n.name: scratch_name(f"floor-{n.name}") for n in plan.nodes}
    lines = ["set -e"]
    lines += [f"ip netns add {ns[n.name]}" for n in plan.nodes]
    for link in plan.links:
        lines.append(f"ip link add {link.a.iface} netns {ns[link.a.node]} type veth "
                     f"peer name {link.b.iface} netns {ns[link.b.node]}")
    for n in plan.nodes:
        for i in n.interfaces:
            lines.append(f"ip -n {ns[n.name]} addr add {i.ipv4} dev {i.name}")
            lines.append(f"ip -n {ns[n.name]} -6 addr add {i.ipv6} dev {i.name}")
            lines.append(f"ip -n {ns[n.name]} link set {i.name} up")
    return "\n".join(lines) + "\n"


def timed(argv: list[str], **kwargs: object) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, **kwargs)  # type: ignore[call-overload]
    return time.perf_counter() - start


def run_labctl(topology: Path, runtime: str = "netns") -> float:
    try:
        return timed([sys.executable, "-m", "harness.cli", "deploy", str(topology), "--no-frr",
                      "--runtime", runtime], stdout=subprocess.DEVNULL, cwd=REPO)
    finally:
        destroy_lab("benchdeploy")


def docker_ready(plan: LabPlan) -> str | None:
    """Why the docker runtime cannot run here, or None."""
    try:
        Lab(plan, "docker").runtime.check(plan, start=False)
    except LabError as exc:
        return str(exc)
    return None


# comm -> who; a shim's comm is its name cut to 15 characters, and it waits for runc
DOCKER_DAEMONS = {"dockerd": "dockerd", "containerd": "containerd",
                  "containerd-shim": "shims and runc"}


@dataclass(frozen=True)
class FloorCost:
    """Host CPU that starting one bare container took, in ms, by who spent it."""

    total_ms: float
    by_who: dict[str, float]  # docker's daemons; the rest is kernel work, runc's init, caller


def host_busy_s() -> float:
    """CPU time all cores spent busy since boot (not idle, not waiting for I/O)."""
    times = machine_ticks()
    return (sum(times) - times[IDLE] - times[IOWAIT]) / TICK


def daemon_cpu_s() -> dict[int, tuple[str, float]]:
    """pid -> (who, CPU s) of docker's daemons, with the children they waited for (runc)."""
    found = {}
    for pid in map(int, filter(str.isdigit, os.listdir("/proc"))):
        who = DOCKER_DAEMONS.get(command(pid))
        if who is not None:
            found[pid] = who, cpu_s(pid, children=True)
    return found


def run_docker_floor(nodes: int) -> tuple[float, FloorCost]:
    """What docker itself takes for this many nodes: as many bare containers of the switch
    image started as labctl starts them (Engine API, networking disabled, same parallelism),
    nothing wired or run in them; the time, and the host CPU each container cost."""
    image = images.resolve(f"{images.REPOSITORY}/switch")
    names = [f"fl-bench-floor-{i}" for i in range(nodes)]
    bare = {"HostConfig": {"NetworkMode": "none"}}
    daemons, busy, start = daemon_cpu_s(), host_busy_s(), time.perf_counter()
    try:
        with ThreadPoolExecutor(max_workers=CREATE_WORKERS) as pool:
            list(pool.map(lambda name: docker_engine.run_container(name, image, bare), names))
        seconds = time.perf_counter() - start
        by_who: dict[str, float] = dict.fromkeys(DOCKER_DAEMONS.values(), 0.0)
        for pid, (who, cpu) in daemon_cpu_s().items():
            by_who[who] += (cpu - daemons.get(pid, (who, 0.0))[1]) * 1000 / nodes
        return seconds, FloorCost((host_busy_s() - busy) * 1000 / nodes, by_who)
    finally:
        docker("rm", "--force", *names, check=False)


def floor_bound(cost: FloorCost, nodes: int, netns_s: float) -> str:
    """Why docker's floor is what it is: each container's CPU, spread over every core, is
    the least time `nodes` of them can take, whatever starts them."""
    cores = os.cpu_count() or 1
    least = cost.total_ms * nodes / 1000 / cores
    who = ", ".join(f"{w} {ms:.0f}" for w, ms in cost.by_who.items())
    rest = cost.total_ms - sum(cost.by_who.values())
    return (f"docker's floor costs {cost.total_ms:.0f} ms of host CPU per container ({who}, "
            f"the rest {rest:.0f}: kernel work, runc's init in each container, the caller): "
            f"on {cores} cores, {nodes} containers take "
            f"at least {least:.2f} s, {least / netns_s:.2f}x netns's whole deploy")


def run_shell(plan: LabPlan, workdir: Path) -> float:
    script = workdir / "floor.sh"
    script.write_text(shell_script(plan))
    try:
        return timed(["bash", str(script)])
    finally:
        scratch.remove([n for n in list_netns() if n.startswith(scratch_name("floor-"))])


def run_mininet(plan: LabPlan, workdir: Path) -> float | None:
    """Mininet's own `net.stop()` removes what it built; never its global cleanup, which
    deletes the host's /tmp/*.log and kills processes by name. Its session ends either way."""
    if not Path("/usr/bin/mn").exists():
        return None
    plan_file = workdir / "plan.json"
    plan_file.write_text(plan.model_dump_json())
    start = time.perf_counter()
    proc = subprocess.Popen(["/usr/bin/python3", "-c", MININET_BUILD, str(plan_file)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    assert proc.stdout and proc.stdin
    try:
        if proc.stdout.readline().strip() != "built":
            raise RuntimeError("mininet build failed")
        seconds = time.perf_counter() - start
        proc.stdin.write("\n")
        proc.stdin.flush()
        proc.wait(timeout=300)
        return seconds
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def memory_per_node(lab: Lab) -> tuple[float, float]:
    """(RSS, PSS) in MiB per node, summed over every process the lab's nodes run."""
    rss, pss = memory_mib([p for node in lab.node_names for p in lab.runtime.node_processes(node)])
    return rss / len(lab.plan.nodes), pss / len(lab.plan.nodes)


def deploy_with_frr(plan: LabPlan, runtime: str) -> float:
    """The same topology deployed with FRR until converged; prints time and memory per node
    and returns the time."""
    lab = Lab(plan, runtime)
    start = time.perf_counter()
    try:
        conv = lab.deploy(timeout=600)
        seconds = time.perf_counter() - start
        rss, pss = memory_per_node(lab)
        print(f"with FRR on {runtime}: deployed and converged in {seconds:.1f} s "
              f"({conv.sessions_total} sessions, {conv.routes_total} routes); "
              f"memory per node: RSS {rss:.1f} MiB, PSS {pss:.1f} MiB")
        return seconds
    finally:
        lab.destroy()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spines", type=int, default=4)
    parser.add_argument("--leaves", type=int, default=16)
    parser.add_argument("--hosts-per-leaf", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-frr", action="store_true")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/deploy.py needs root")
    workdir = Path(tempfile.mkdtemp(prefix="fl-bench-"))
    topology = workdir / "bench.yml"
    topology.write_text(clos_yaml(args.spines, args.leaves, args.hosts_per_leaf))
    plan = plan_from_file(topology)
    print(f"topology: {len(plan.nodes)} nodes, {len(plan.links)} links "
          f"({2 * len(plan.links)} addressed interfaces), {args.rounds} rounds, median shown")
    results: dict[str, list[float]] = {"netns": [], "docker": [], "docker-floor": [],
                                       "shell": [], "mininet": []}
    floor_costs: list[FloorCost] = []
    no_docker = docker_ready(plan)
    for _ in range(args.rounds):
        results["netns"].append(run_labctl(topology))
        if no_docker is None:
            results["docker"].append(run_labctl(topology, "docker"))
            seconds, cost = run_docker_floor(len(plan.nodes))
            results["docker-floor"].append(seconds)
            floor_costs.append(cost)
        results["shell"].append(run_shell(plan, workdir))
        mininet = run_mininet(plan, workdir)
        if mininet is not None:
            results["mininet"].append(mininet)
    med = {k: statistics.median(v) for k, v in results.items() if v}
    for k, v in med.items():
        print(f"  {k:<8} {v:6.2f} s")
    print(f"netns vs shell floor:  {med['netns'] / med['shell']:.2f}x the floor's time "
          f"(goal <= 2x)")
    if "docker" in med:
        print(f"docker vs netns:       {med['docker'] / med['netns']:.2f}x netns's time "
              f"(goal <= 3x; docker's own floor, {len(plan.nodes)} bare containers started, "
              f"is {med['docker-floor'] / med['netns']:.2f}x)")
        print(f"docker vs its floor:   {med['docker'] / med['docker-floor']:.2f}x the "
              "floor's time")
        median_cost = sorted(floor_costs, key=lambda c: c.total_ms)[len(floor_costs) // 2]
        print(floor_bound(median_cost, len(plan.nodes), med["netns"]))
    else:
        print(f"no docker runtime this run: {no_docker}")
    if "mininet" in med:
        print(f"netns vs mininet:      {med['mininet'] / med['netns']:.2f}x faster (goal >= 3x)")
    else:
        print("mininet not installed (apt-get install mininet): no Mininet baseline this run")
    if not args.skip_frr:
        runtimes = ["netns", *(["docker"] if no_docker is None else []),
                    *(["mininet"] if "mininet" in med else [])]
        frr = {runtime: deploy_with_frr(plan, runtime) for runtime in runtimes}
        for runtime in runtimes[1:]:
            print(f"with FRR, {runtime} vs netns: {frr[runtime] / frr['netns']:.2f}x netns's "
                  "time")
    shutil.rmtree(workdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
