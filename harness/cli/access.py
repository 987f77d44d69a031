"""exec and vtysh: reach inside a node, or run one command on every node a label selects."""

from __future__ import annotations

import argparse

from harness.cli.console import make_console
from harness.cli.labref import open_lab
from harness.core.errors import CheckFailed, UsageError
from harness.deploy.lab import Lab
from harness.topology.plan import LabPlan, NodePlan

out = make_console()


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("exec", help="run a command inside a node: exec NODE -- CMD..., "
                            "or on many: exec -t FILE [--label KEY=VAL] --cmd CMD")
    p.add_argument("node", nargs="?", help="NODE or LAB/NODE (interactive, or -- CMD...)")
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD")
    p.add_argument("-t", "--topo", dest="topology", metavar="FILE",
                   help="the lab this topology file names (with --cmd)")
    p.add_argument("--name", dest="lab", metavar="LAB", help="the lab (with --cmd)")
    p.add_argument("--label", action="append", default=[], metavar="KEY=VAL",
                   help="only nodes with this label (repeatable; containerlab's clab-node-kind, "
                   "clab-node-name, clab-node-group also work)")
    p.add_argument("--cmd", help="a shell command to run on every selected node")
    p.set_defaults(run=exec_node)

    p = commands.add_parser("vtysh", help="FRR's shell on a node (interactive without -c)")
    p.add_argument("node", help="NODE or LAB/NODE")
    p.add_argument("-c", dest="commands", action="append", default=[], metavar="CMD")
    p.set_defaults(run=vtysh)


def lab_and_node(target: str) -> tuple[Lab, str]:
    lab_name, _, node = target.rpartition("/")
    lab = open_lab(lab_name or None)
    lab.node(node)  # a clear error for an unknown node
    return lab, node


def node_labels(plan: LabPlan, node: NodePlan) -> dict[str, str]:
    """The node's labels plus those containerlab puts on every container."""
    return {"containerlab": plan.name, "clab-node-name": node.name,
            "clab-node-kind": node.kind.value, "clab-node-group": node.group or "",
            "clab-topo-file": plan.source, **node.labels}


def selected(plan: LabPlan, labels: list[str]) -> list[NodePlan]:
    wanted = []
    for text in labels:
        key, sep, value = text.partition("=")
        if not sep or not key:
            raise UsageError(f"--label {text!r}: write KEY=VALUE, e.g. clab-node-kind=linux")
        wanted.append((key, value))
    return [n for n in plan.nodes
            if all(node_labels(plan, n).get(k) == v for k, v in wanted)]


def exec_node(args: argparse.Namespace) -> int:
    if args.cmd is None:
        if args.node is None or args.label or args.topology or args.lab:
            raise UsageError("exec NODE -- CMD, or exec -t FILE|--name LAB [--label K=V] "
                             "--cmd CMD")
        lab, node = lab_and_node(args.node)
        argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
        return lab.runtime.interactive(node, lab.runtime.confine(node, argv or ["bash"]))
    if args.argv:
        raise UsageError("give the command once: --cmd CMD or -- CMD")
    lab = open_lab(args.lab or args.node, args.topology)
    nodes = selected(lab.plan, args.label)
    if not nodes:
        raise UsageError(f"no node of lab {lab.plan.name} has label(s) {', '.join(args.label)}")
    failed = []
    for node in nodes:
        result = lab.runtime.run(node.name, lab.runtime.confine(node.name, ["sh", "-c", args.cmd]))
        out.rule(f"{node.name} (exit {result.returncode})", align="left")
        print(result.stdout + result.stderr, end="", flush=True)
        if result.returncode != 0:
            failed.append(node.name)
    if failed:
        raise CheckFailed(f"{args.cmd!r} failed on {', '.join(failed)}")
    return 0


def vtysh(args: argparse.Namespace) -> int:
    lab, node = lab_and_node(args.node)
    commands = [a for c in args.commands for a in ("-c", c)]
    return lab.runtime.interactive(node, lab.frr(node).vtysh_argv(*commands))
