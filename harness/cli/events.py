"""events: a lab's record of what changed and when (harness/core/events.py), in time order;
`--follow` keeps printing as it grows."""

from __future__ import annotations

import argparse
import time
from fnmatch import fnmatchcase

from rich.markup import escape

from harness.cli.console import make_console
from harness.cli.labref import open_lab
from harness.core.events import Event, Follower, read

out = make_console()
FOLLOW_EVERY_S = 0.2


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("events", help="what changed in a lab and when: faults, links, "
                            "BFD and BGP sessions, routes, flows, exercise checks")
    p.add_argument("name", nargs="?", metavar="LAB", help="the lab (default: the only one)")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new events")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="json: one object per line")
    p.add_argument("--kind", action="append", default=[], metavar="KIND",
                   help="only these kinds (repeatable): fault, flow, link, bfd, bgp, routes, "
                        "alarm, deploy, exercise, recorder")
    p.add_argument("--node", metavar="PATTERN", help="only these nodes ('p3-*'); lab-wide "
                   "events (faults, deploy) stay")
    p.set_defaults(run=events)


def shown(event: Event, args: argparse.Namespace) -> bool:
    return (not args.kind or event.kind in args.kind) and (
        args.node is None or event.node is None or fnmatchcase(event.node, args.node))


def show(found: list[Event], args: argparse.Namespace) -> None:
    for event in filter(lambda e: shown(e, args), found):
        if args.format == "json":
            print(event.line(), end="", flush=True)
        else:
            out.print(escape(event.text()), highlight=False, soft_wrap=True)


def events(args: argparse.Namespace) -> int:
    lab = open_lab(args.name)
    if not args.follow:
        show(read(lab.dir), args)
        return 0
    follower = Follower(lab.dir, from_start=True)
    try:
        while lab.dir.is_dir():
            show(follower.poll(), args)
            time.sleep(FOLLOW_EVERY_S)
    except KeyboardInterrupt:
        pass
    return 0

