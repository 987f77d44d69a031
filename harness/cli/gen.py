"""gen: write a topology file for a parametric fabric, one subcommand per registered
generator (harness/fabrics/), its options made from the generator's parameters."""

from __future__ import annotations

import argparse
import typing
from pathlib import Path

from harness.cli.console import make_console
from harness.fabrics import GENERATORS
from harness.fabrics.base import Fabric, options, render

out = make_console(stderr=True)


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("gen", help="generate a topology file for a fabric")
    fabrics = p.add_subparsers(dest="fabric", required=True, metavar="FABRIC")
    for fabric in GENERATORS.values():
        f = fabrics.add_parser(fabric.name, help=fabric.help)
        hints = typing.get_type_hints(fabric.params)
        for option in options(fabric.params):
            meta = option.metadata
            f.add_argument(f"--{option.name.replace('_', '-')}", dest=option.name,
                           type=hints[option.name] if hints[option.name] in (int, float)
                           else str,
                           default=option.default, required=meta["required"],
                           choices=meta["choices"] or None, help=meta["help"])
        f.add_argument("-o", "--output", help="write to this file instead of stdout")
        f.set_defaults(run=gen, generator=fabric)


def gen(args: argparse.Namespace) -> int:
    fabric: Fabric = args.generator
    params = fabric.params(**{o.name: getattr(args, o.name) for o in options(fabric.params)})
    text = render(fabric, params)
    if args.output:
        Path(args.output).write_text(text)
        out.print(f"wrote {args.output}")
    else:
        print(text, end="")
    return 0
