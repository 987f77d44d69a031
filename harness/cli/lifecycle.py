"""deploy, destroy, list, save: a lab's life from topology file to nothing."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.cli.console import make_console
from harness.cli.labref import add_lab_arguments, is_topology, lab_name, open_lab
from harness.core.errors import LabError, UsageError
from harness.deploy.converge import Convergence
from harness.deploy.lab import Lab, destroy_lab, lab_names, plan_of, release_host_settings
from harness.deploy.lab import deploy as deploy_lab
from harness.deploy.stages import Progress as DeployProgress
from harness.linux import ksm, scratch
from harness.nodes.frr import frr_version
from harness.runtime import RUNTIMES
from harness.runtime.mininet import MininetRuntime
from harness.topology.pipeline import plan_from_file
from harness.topology.plan import LabPlan
from harness.topology.schema import Role

out = make_console()


def add_topology_arguments(p: argparse.ArgumentParser) -> None:
    """What every command that deploys a topology file takes."""
    p.add_argument("file", nargs="?", help="the topology file (or -t FILE)")
    p.add_argument("-t", "--topo", metavar="FILE", help="the topology file, as containerlab's -t")
    p.add_argument("--node-filter", metavar="A,B",
                   help="deploy only these nodes; links to the others are skipped and reported")
    p.add_argument("--name", help="lab name instead of the file's (run two copies side by side)")
    p.add_argument("--timeout", type=float, default=180.0,
                   help="seconds to wait for every session and route (default 180)")
    p.add_argument("--share-memory", choices=ksm.CHOICES, default="auto",
                   help="merge the pages the nodes' processes hold alike (KSM). auto "
                   f"(default): only a lab of {ksm.AUTO_MIN_FRR_NODES} FRR nodes or more whose "
                   "nodes would take over a quarter of the memory available. Sharing changes "
                   "the host while such a lab exists: KSM runs, its ksmd thread at real-time "
                   "priority (SCHED_FIFO 1), and the lab's processes run without address-space "
                   "randomisation so their pages match; the host's settings come back when the "
                   "last sharing lab is destroyed")


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("deploy", help="build a lab from a topology file and wait for it "
                            "to converge")
    add_topology_arguments(p)
    p.add_argument("--runtime", choices=RUNTIMES, default="netns",
                   help="how nodes run: netns (default, no images), docker (images from "
                   "`make images`) or mininet (Debian's Mininet makes them)")
    p.add_argument("--no-frr", action="store_true",
                   help="build namespaces and links only (no routing daemons)")
    p.add_argument("--raise-neighbour-limits", action="store_true",
                   help="where the host's ARP/ND tables (shared by every namespace) cannot hold "
                   "the lab's neighbours, raise their limits (net.ipv4/ipv6.neigh.default."
                   "gc_thresh*) rather than refuse; the host's values come back when the last "
                   "lab that raised them is destroyed (fpf-64 needs it on a default host)")
    p.set_defaults(run=deploy)

    p = commands.add_parser("mininet", help="deploy a topology with Mininet making the nodes "
                            "and open Mininet's CLI on it; the lab goes when the CLI ends")
    add_topology_arguments(p)
    p.set_defaults(run=mininet)

    p = commands.add_parser("destroy", help="remove a lab completely (also a crashed one)")
    add_lab_arguments(p, "the lab to remove")
    p.add_argument("--all", action="store_true", help="every fabric-lab lab on this host")
    p.add_argument("-c", "--cleanup", action="store_true",
                   help="also remove the configs `save` wrote (clab-LAB/ beside the topology "
                   "file), as containerlab's --cleanup removes its lab directory")
    p.set_defaults(run=destroy)

    p = commands.add_parser("list", help="labs on this host")
    p.set_defaults(run=list_labs)

    p = commands.add_parser("save", help="write each router's running config next to the "
                            "topology file, in clab-LAB/NODE/frr.conf (as containerlab does)")
    add_lab_arguments(p, "the lab to save")
    p.set_defaults(run=save)


def require_root() -> None:
    if os.geteuid() != 0:
        raise LabError("labctl needs root to create namespaces; run it with sudo")


@contextmanager
def progress_bars() -> Iterator[DeployProgress]:
    """A deploy's progress drawn: a bar per stage, notes printed above the bars."""
    columns = (TextColumn("[bold]{task.description:<12}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[detail]}"), TimeElapsedColumn())
    with Progress(*columns, console=out, transient=False) as bar:
        task: list[int] = []

        def stage(name: str, total: int) -> None:
            if task:
                bar.update(task[-1], completed=bar.tasks[task[-1]].total)
            task.append(bar.add_task(name, total=total, detail=""))

        def converge(conv: Convergence) -> None:
            bar.update(task[-1], completed=conv.sessions_up + conv.neighbours_up,
                       detail=f"routes {conv.routes_present}/{conv.routes_total}")

        def note(text: str, caution: bool) -> None:
            out.print(f"{'[yellow]note:[/] ' if caution else ''}{escape(text)}",
                      soft_wrap=True)

        yield DeployProgress(stage, lambda n: bar.advance(task[-1], n), converge, note)


def deploy(args: argparse.Namespace) -> int:
    require_root()
    with progress_bars() as progress:
        lab = deploy_lab(topology_file(args), name=args.name, node_filter=node_filter(args),
                         runtime=args.runtime, share_memory=args.share_memory,
                         progress=progress, start=not args.no_frr, timeout=args.timeout,
                         raise_neighbour_limits=args.raise_neighbour_limits)
    plan = lab.plan
    for change in lab.host_changes:
        out.print(f"[yellow]host:[/] raised {change} (the host's value comes back when the last "
                  "lab that raised it is destroyed)", highlight=False, soft_wrap=True)
    from harness.cli.inspect import print_inspect
    print_inspect(lab)
    report_refused(lab)
    if lab.convergence is not None:
        out.print(f"[green]lab {plan.name} is up[/]: {lab.convergence.summary()}.")
    me = as_typed()
    routers = [n for n in plan.nodes if n.runs_frr] or plan.nodes
    hosts = [n for n in plan.nodes if n.role is Role.host] or routers
    src, dst = hosts[0], hosts[-1]
    ping = f"{me} exec {src.name} -- ping -c3 {dst.loopback4}" if dst.loopback4 else \
        f"{me} exec {src.name} -- ip address"
    out.print(f"Try: {ping}   |   {me} vtysh {routers[0].name} -c 'show ip route'"
              f"   |   {me} inspect {plan.name}   |   {me} destroy {plan.name}",
              soft_wrap=True)
    return 0


def node_filter(args: argparse.Namespace) -> list[str] | None:
    return args.node_filter.split(",") if args.node_filter else None


def report_refused(lab: Lab) -> None:
    """Lines of the users' own configs this host's FRR refused (e.g. written for a newer FRR),
    per node, with FRR's message."""
    for node in lab.plan.nodes:
        if node.runs_own_frr:
            refused = lab.frr(node.name).refused()
            if refused:
                out.print(f"[yellow]{node.name}:[/] FRR {frr_version()} refused "
                          f"{len(refused)} line(s) of {node.frr_config}:", soft_wrap=True)
                for line in refused:
                    out.print(f"    {escape(line)}", soft_wrap=True, highlight=False)


def topology_file(args: argparse.Namespace) -> str:
    """FILE or -t FILE, as containerlab users type it."""
    if (args.file is None) == (args.topo is None):
        raise UsageError("give the topology file once: `deploy FILE` or `deploy -t FILE`")
    return args.file or args.topo


def mininet(args: argparse.Namespace) -> int:
    """Like `mn`: the network lives as long as its CLI (commands can come from a pipe)."""
    require_root()
    lab = Lab(plan_from_file(topology_file(args), args.name, node_filter(args)), "mininet",
              args.share_memory)
    assert isinstance(lab.runtime, MininetRuntime)
    lab.runtime.cli = True  # set before the deploy: Mininet keeps its CLI's terminal
    try:
        with progress_bars() as progress:
            lab.deploy(progress, timeout=args.timeout)
        out.print(f"lab {lab.plan.name} is up; Mininet's CLI follows (`r1 ping r2`, `nodes`, "
                  f"`exit`); `{as_typed()} vtysh {lab.plan.name}/NODE` from another shell")
        return lab.runtime.run_cli(lab.plan)
    finally:
        lab.destroy()


def as_typed() -> str:
    """How the user can call labctl: by name if it is on PATH, else by its path
    (`make lab` installs it in .venv/bin, which is not on PATH)."""
    if shutil.which("labctl"):
        return "labctl"
    path = os.path.relpath(sys.argv[0])
    if path.startswith(os.pardir):
        return os.path.abspath(sys.argv[0])
    return path if os.sep in path else f".{os.sep}{path}"


def destroy(args: argparse.Namespace) -> int:
    require_root()
    if args.all == (args.name is not None or args.topology is not None):
        raise LabError("name one lab (NAME, FILE or -t FILE) or use --all")
    names = lab_names() if args.all else [lab_name(args.name, args.topology)]
    for name in names:
        plan = plan_of(name)  # read before destroy removes it: where `save` wrote
        out.print(f"destroyed {name}" if destroy_lab(name) else f"{name}: nothing to destroy")
        if args.cleanup:
            remove_saved_configs(name, plan, args.topology or args.name)
    if args.all:
        for netns in scratch.sweep_stale():
            out.print(f"removed scratch namespace {netns} (its probe or test was killed)")
        release_host_settings(None)  # labs destroyed by hand or lost in a crash held some too
    return 0


def list_labs(args: argparse.Namespace) -> int:
    for name in lab_names():
        out.print(name)
    return 0


def save(args: argparse.Namespace) -> int:
    lab = open_lab(args.name, args.topology)
    folder = saved_configs(lab.plan)
    for node in lab.plan.nodes:
        if not node.runs_frr:
            out.print(f"{node.name}: kind {node.kind.value}, no config to save")
            continue
        target = folder / node.name / "frr.conf"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(lab.frr(node.name).vtysh("show running-config"))
        out.print(f"{node.name}: {target}")
    return 0


def saved_configs(plan: LabPlan) -> Path:
    """Where `save` writes: containerlab's lab directory, beside the topology file."""
    return plan.topology_dir / f"clab-{plan.name}"


def remove_saved_configs(name: str, plan: LabPlan | None, given: str | None) -> None:
    """The folder `save` wrote for lab `name`, removed only when it holds nothing else (a
    NODE/frr.conf per node): whatever else is in it is the user's."""
    if plan is None:
        if given is None or not is_topology(Path(given)):
            out.print(f"{name}: no saved configs known (the lab is gone); give its topology "
                      "file to clean up beside it")
            return
        plan = plan_from_file(given, name)
    folder = saved_configs(plan)
    if not folder.is_dir():
        return
    nodes = {n.name for n in plan.nodes}
    foreign = [str(p.relative_to(folder)) for p in folder.rglob("*") if not (
        (p.is_dir() and p.parent == folder and p.name in nodes)
        or (p.is_file() and p.name == "frr.conf" and p.parent.parent == folder
            and p.parent.name in nodes))]
    if foreign:
        raise LabError(f"{folder} holds more than `save` wrote ({', '.join(sorted(foreign)[:5])}"
                       "); left it alone, remove it yourself if it is yours to remove")
    shutil.rmtree(folder)
    out.print(f"removed {folder}")
