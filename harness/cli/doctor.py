"""doctor: which kernel features and tools this host has, what fabric-lab does without them,
a verdict: which labs run here, through which fallbacks and with which opt-ins, and how many
nodes of each kind the host can take (harness/instruments/capacity.py).

Kernel features are probed by doing the real thing in a scratch namespace, which needs root,
as every lab does: without it doctor says so, shows what it can read, and exits 1. It exits 1
too when the default lab (`make lab`) cannot run here.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import time
from dataclasses import asdict

from rich.table import Table

from harness.cli.console import make_console
from harness.core.build import REPO
from harness.core.errors import LabError
from harness.core.events import read
from harness.deploy.lab import Lab, lab_names
from harness.deploy.readiness import Host, Verdict, verdict
from harness.faults import records
from harness.instruments.capacity import CPU_SHARE, NodeCost, Room, capacity, survey
from harness.links.impair.backend import describe_path
from harness.linux import ksm
from harness.linux.features import Tool, features, has, neighbour_room, tools
from harness.topology.pipeline import plan_from_file

out = make_console()
DEFAULT_LAB = "fpf-mini.yml"  # what `make lab` deploys
REST_S = 10.0  # a lab whose record is this quiet is at rest: BFD and BGP are settled
TOPOLOGIES = REPO / "topologies"

CONSEQUENCE = {
    "netem": "impaired links use the userspace impairment path",
    "tc_redirect": "no userspace impairment path either",
    "fq": "no pacing qdisc; rate limits use htb/tbf",
    "fq_codel": "no AQM qdisc on links",
    "vrf": "no VRF-based tenant separation; SRv6 End.DT4/End.DT46 run in the userspace engine "
           "fl-srv6 (the kernel's need a VRF device)",
    "openvswitch": "links are veth pairs (no OVS bridges needed)",
    "mpls": "no MPLS forwarding; backbones use SRv6",
    "seg6": "SRv6 encapsulation runs in the userspace engine fl-srv6 (RBB labs work)",
    "seg6local": "SRv6 SIDs run in the userspace engine fl-srv6 (RBB labs work)",
    "nexthop_groups": "weighted ECMP is unavailable to the SAI dataplane",
}


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("doctor", help="kernel features and tools on this host, and "
                            "which labs run here")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=doctor)


def memory_sharing() -> str:
    """Whether big labs can share their memory here (harness/linux/ksm.py)."""
    why = ksm.unsupported()
    return f"no: {why}" if why else (
        f"yes (KSM; `deploy --share-memory auto` shares a lab of {ksm.AUTO_MIN_FRR_NODES} FRR "
        "nodes or more whose nodes would take over a quarter of the memory available)")


def verdicts(found: list[Tool]) -> list[Verdict]:
    """One per shipped topology, the default lab first, on a host with the tools `found`."""
    installed = {t.name for t in found if t.path}
    host = Host(feature=has, tool=installed.__contains__, available_mib=ksm.mem_available_mib(),
                can_share_memory=ksm.unsupported() is None, neighbour_problem=neighbour_room)
    files = sorted(TOPOLOGIES.glob("*.yml"), key=lambda f: (f.name != DEFAULT_LAB, f.name))
    return [verdict(f.name, plan_from_file(f), host) for f in files]


def node_costs() -> tuple[list[NodeCost], Room, list[str]]:
    """The costs measured on the labs at rest now, else those remembered; the host's room;
    why a lab running now was not measured."""
    labs, skipped = [], []
    for name in lab_names():
        with contextlib.suppress(LabError):  # one being deployed or destroyed has no plan
            lab = Lab.open(name)
            why = busy(lab)
            if why:
                skipped.append(f"{name}: {why}")
            else:
                labs.append(lab)
    return (*survey(labs), skipped)


def busy(lab: Lab) -> str | None:
    """Why a lab is not at rest: a fault in place, or a change in its event record lately."""
    if records.load_all(lab.dir):
        return "a fault is in place"
    events = read(lab.dir)
    if not events:
        return "no event record (still deploying?)"
    quiet = time.time() - events[-1].t
    return None if quiet >= REST_S else f"its last change was {quiet:.1f} s ago"


def doctor(args: argparse.Namespace) -> int:
    if os.geteuid() != 0:
        return unprivileged(args)
    feats, found = features(), tools()
    judged = verdicts(found)
    ready = judged[0].ready
    costs, room, skipped = node_costs()
    if args.json:
        print(json.dumps({"kernel": platform.release(), "features": [asdict(f) for f in feats],
                          "tools": [asdict(t) for t in found],
                          "impairment_path": describe_path(),
                          "memory_sharing": memory_sharing(),
                          "labs": {v.lab: str(v) for v in judged}, "ready": ready,
                          "capacity": {"room": asdict(room), "not_measured": skipped,
                                       "kinds": [
                              {**asdict(c), **asdict(capacity(c, room))} for c in costs]}},
                         indent=2))
        return 0 if ready else 1
    table = Table(title=f"kernel {platform.release()}: features (each probed in a scratch netns)")
    for column in ("feature", "available", "detail / consequence"):
        table.add_column(column)
    for f in feats:
        detail = f.detail if f.available else f"{f.detail} -> {CONSEQUENCE.get(f.name, '')}"
        table.add_row(f.name, "[green]yes[/]" if f.available else "[red]no[/]", detail)
    out.print(table)
    print_tools(found)
    out.print(f"impaired links will use: {describe_path()}", highlight=False)
    out.print(f"big labs can share their memory: {memory_sharing()}", highlight=False)
    table = Table(title="verdict: the shipped labs on this host")
    for column in ("lab", "verdict"):
        table.add_column(column)
    for v in judged:
        colour = "red" if not v.ready else "yellow" if v.opt_ins or v.fallbacks else "green"
        table.add_row(v.lab, f"[{colour}]{v}[/]")
    out.print(table)
    print_capacity(costs, room, skipped)
    out.print(f"[green]ready[/]: `make lab` deploys {DEFAULT_LAB}" if ready else
              f"[red]not ready[/] for the default lab ({DEFAULT_LAB}): {judged[0]}")
    return 0 if ready else 1


def print_capacity(costs: list[NodeCost], room: Room, skipped: list[str]) -> None:
    out.print(f"room for labs: {room.mib / 1024:.1f} GiB of memory, {room.cores:.2f} cores "
              f"(labs at rest take at most {CPU_SHARE:.0%} of the cores)", highlight=False)
    for why in skipped:
        out.print(f"not measured, not at rest: {why}", highlight=False)
    if not costs:
        out.print("nodes this host can take: no lab has been measured here yet; deploy one "
                  "(`make lab`) and run doctor again while it runs", highlight=False)
        return
    table = Table(title="nodes of one kind this host can take (cost at rest, measured here)")
    for column in ("node kind", "PSS (MiB)", "CPU (cores)", "measured on", "nodes",
                   "runs out first"):
        table.add_column(column)
    for c in costs:
        fits = capacity(c, room)
        when = datetime.datetime.fromtimestamp(c.measured).strftime("%Y-%m-%d %H:%M")
        table.add_row(c.kind, f"{c.pss_mib:.1f}", f"{c.cores:.3f}",
                      f"{c.lab} ({c.nodes} such), {when}", str(fits.fits), fits.limit)
    out.print(table)


def unprivileged(args: argparse.Namespace) -> int:
    """What doctor can say without root, and why that is not enough."""
    why = ("kernel features are probed in a scratch network namespace, and every lab's nodes "
           "are namespaces: both need root; run `sudo labctl doctor`")
    found = tools()
    if args.json:
        print(json.dumps({"kernel": platform.release(), "tools": [asdict(t) for t in found],
                          "ready": False, "why": why}, indent=2))
        return 1
    out.print(f"kernel {platform.release()}", highlight=False)
    print_tools(found)
    out.print(f"[red]not ready[/]: labctl runs as root; {why}", highlight=False, soft_wrap=True)
    return 1


def print_tools(found: list[Tool]) -> None:
    table = Table(title="tools")
    for column in ("tool", "path", "version"):
        table.add_column(column)
    for t in found:
        table.add_row(t.name, t.path or "[red]missing[/]", t.version)
    out.print(table)


