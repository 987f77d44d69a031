"""exec and vtysh: reach inside a node."""

from __future__ import annotations

import argparse

from harness.cli.labref import open_lab
from harness.lab import Lab


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("exec", help="run a command inside a node: exec NODE -- CMD...")
    p.add_argument("node", help="NODE or LAB/NODE")
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD")
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


def exec_node(args: argparse.Namespace) -> int:
    lab, node = lab_and_node(args.node)
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    return lab.runtime.interactive(node, argv or ["bash"])


def vtysh(args: argparse.Namespace) -> int:
    lab, node = lab_and_node(args.node)
    commands = [a for c in args.commands for a in ("-c", c)]
    return lab.runtime.interactive(node, lab.frr(node).vtysh_argv(*commands))
