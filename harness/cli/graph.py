"""graph: draw a lab (deployed, or straight from a topology file) as dot, mermaid or html."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.labref import TOPOLOGY_SUFFIXES, is_topology, open_lab
from harness.core.errors import UsageError
from harness.topology.drawing import FORMATS
from harness.topology.pipeline import plan_from_file


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("graph", help="draw a lab or a topology file")
    p.add_argument("name", nargs="?", help="a lab name, a topology file or a folder holding one")
    p.add_argument("-t", "--topo", metavar="FILE", help="the topology file, as containerlab's -t")
    p.add_argument("--format", choices=sorted(FORMATS), default="dot")
    p.add_argument("-o", "--output", help="write to this file instead of stdout")
    p.set_defaults(run=graph)


def graph(args: argparse.Namespace) -> int:
    if (args.name is None) == (args.topo is None):
        raise UsageError("graph NAME|FILE, or graph -t FILE")
    source = Path(args.topo or args.name)
    plan = plan_from_file(source) if args.topo or source.suffix in TOPOLOGY_SUFFIXES or \
        is_topology(source) else open_lab(args.name).plan
    text = FORMATS[args.format](plan)
    if args.output:
        Path(args.output).write_text(text)
    else:
        print(text, end="")
    return 0
