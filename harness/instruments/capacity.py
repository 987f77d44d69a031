"""How many nodes of each kind this host can take (`labctl doctor`): what a node of a kind
costs at rest, measured on labs that ran here, against what the host has once its own use is
set aside.

A node's cost is its processes' PSS and CPU at rest (harness/instruments/resources.py), per
kind of node: kind and role, and for a host the planes its NIC sprays over, since a host's
prober and sprayer cost more than its FRR. Doctor measures the labs running when it runs and
remembers the costs (`build/node-costs.json`: this host's, as the engines built there are), so
a later doctor with no lab up still answers, saying where and when they were measured.

The room: memory the host has, less the tenth deploy keeps free (ksm.RESERVE_SHARE);
CPU: half the cores, since a lab at rest must leave the rest to what it is for (convergence
after a fault, traffic engines, a test's timing). The host's own use (what is not a lab's)
comes off both. Routes grow with a fabric, so a node of a bigger fabric costs more memory than
one measured on a small lab: the count says which lab the cost came from.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.core.build import BUILD_DIR
from harness.instruments.resources import WINDOW_S, Resources, idle_cores, measure
from harness.linux import ksm
from harness.linux.cpu import machine_ticks
from harness.linux.files import replace_file
from harness.spray.nic import nic_planes, sprays

if TYPE_CHECKING:
    from harness.runtime.context import LabContext
    from harness.topology.plan import LabPlan, NodePlan

COSTS_FILE = BUILD_DIR / "node-costs.json"
CPU_SHARE = 0.5  # of the cores, for labs at rest


@dataclass(frozen=True)
class NodeCost:
    """What one node of a kind costs at rest: the mean over `nodes` measured in `lab`."""

    kind: str
    nodes: int
    pss_mib: float
    cores: float
    lab: str
    measured: float  # wall-clock seconds


@dataclass(frozen=True)
class Room:
    """What the host can give labs, its own use set aside."""

    mib: float
    cores: float


@dataclass(frozen=True)
class Capacity:
    kind: str
    fits: int  # nodes of this kind alone
    limit: str  # "memory" or "CPU": what runs out first


def node_kind(plan: LabPlan, node: NodePlan) -> str:
    """'sai leaf', 'host, NIC over 8 planes': the kind as its cost differs."""
    kind = node.kind.value if node.role in (None, node.kind.value) else f"{node.kind} {node.role}"
    if sprays(plan, node):
        kind += f", NIC over {len(set(nic_planes(plan, node).values()))} planes"
    return kind


def costs(plan: LabPlan, found: Resources) -> list[NodeCost]:
    """Each kind's mean per node in one lab's measurement; a node that runs no process (a
    bridge) costs the kernel only, and is not counted."""
    names = {n.name for n in plan.nodes}
    by_kind: dict[str, list[tuple[float, float]]] = {}
    for cost in found.nodes:
        if cost.name in names and cost.processes:
            kind = node_kind(plan, plan.node(cost.name))
            by_kind.setdefault(kind, []).append((cost.pss_mib, cost.cpu_cores))
    now = time.time()
    return [NodeCost(kind, len(seen), sum(m for m, _ in seen) / len(seen),
                     sum(c for _, c in seen) / len(seen), plan.name, now)
            for kind, seen in sorted(by_kind.items())]


def room(running: list[Resources], idle_cores: float, cores: int, total_mib: float,
         available_mib: float) -> Room:
    """The host's room for labs: what is free now and what the labs `running` hold (they
    give it back), less the reserve and the cores labs at rest leave alone."""
    lab_mib = sum(r.lab.pss_mib for r in running)
    lab_cores = sum(r.lab.cpu_cores for r in running)
    return Room(mib=available_mib + lab_mib - ksm.RESERVE_SHARE * total_mib,
                cores=idle_cores + lab_cores - (1 - CPU_SHARE) * cores)


def survey(labs: list[LabContext]) -> tuple[list[NodeCost], Room]:
    """Measure the labs running now (each over resources' window) and remember their kinds'
    costs; the costs known on this host, and its room."""
    running = [measure(lab) for lab in labs]
    known = remember([c for lab, r in zip(labs, running, strict=True)
                      for c in costs(lab.plan, r)]) if running else recall()
    if running:
        idle = sum(r.host_idle_cores for r in running) / len(running)
    else:
        before = machine_ticks()
        time.sleep(WINDOW_S)
        idle = idle_cores(before, machine_ticks())
    return known, room(running, idle, os.cpu_count() or 1, ksm.meminfo_mib("MemTotal"),
                       ksm.mem_available_mib())


def capacity(cost: NodeCost, host: Room) -> Capacity:
    """Nodes of this kind alone the room takes, and which of memory and CPU runs out first."""
    by_memory = max(0, math.floor(host.mib / cost.pss_mib)) if cost.pss_mib else math.inf
    by_cpu = max(0, math.floor(host.cores / cost.cores)) if cost.cores > 0 else math.inf
    if by_memory <= by_cpu:
        return Capacity(cost.kind, int(by_memory), "memory")
    return Capacity(cost.kind, int(by_cpu), "CPU")


def remember(measured: list[NodeCost], path: Path = COSTS_FILE) -> list[NodeCost]:
    """The remembered costs with these measured now in place of their kinds'."""
    kept = {c.kind: c for c in recall(path)}
    kept |= {c.kind: c for c in measured}
    known = sorted(kept.values(), key=lambda c: c.kind)
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_file(path, json.dumps([asdict(c) for c in known], indent=1) + "\n")
    return known


def recall(path: Path = COSTS_FILE) -> list[NodeCost]:
    try:
        return [NodeCost(**c) for c in json.loads(path.read_text())]
    except (OSError, ValueError, TypeError):
        return []
