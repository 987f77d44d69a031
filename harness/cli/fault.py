"""fault: break a running lab from the shell and put it back, as operators do.

What is injected is kept in the lab dir (harness/faults/records.py), so `list` in a second
shell shows it and `clear` there undoes it. Impairments (delay, loss on a link's egress) stay
`labctl netem`; `gray-loss` here is a silent drop with the link up.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import datetime

from rich.table import Table

from harness.cli.console import make_console
from harness.cli.labref import open_lab
from harness.cli.lifecycle import require_root
from harness.core.errors import LabError
from harness.deploy.converge import wait_converged
from harness.deploy.lab import Lab
from harness.faults import Faults
from harness.faults.injector import Catalog, catalog
from harness.faults.records import Undo

out = make_console()


def register(commands: argparse._SubParsersAction, faults: Catalog | None = None) -> None:
    """A verb for each of the catalog's (harness/faults/catalog/), then list and clear."""
    faults = faults or catalog()
    p = commands.add_parser("fault", help="inject a fault into a running lab, list, clear")
    p.add_argument("name", metavar="NAME|FILE", help="the lab, or the topology file naming it")
    p.set_defaults(faults=faults)
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    for verb in faults.verbs.values():
        s = verbs.add_parser(verb.name, help=verb.help, description=verb.help)
        verb.arguments(s)
        s.set_defaults(run=inject)
        if verb.undoes:
            waits(s)

    s = verbs.add_parser("list", help="the faults in place now, whoever injected them")
    s.add_argument("--json", action="store_true")
    s.set_defaults(run=show)
    what = "undo faults, newest first: all, or these ids"
    s = verbs.add_parser("clear", help=what, description=what)
    s.add_argument("ids", nargs="*", type=int, metavar="ID")
    s.set_defaults(run=clear)
    waits(s)


def waits(verb: argparse.ArgumentParser) -> None:
    """A verb that undoes faults returns once the lab has converged again, unless told not to."""
    verb.description = f"{verb.description}; returns once the lab has converged again"
    verb.add_argument("--no-wait", action="store_true", help="return once it is undone")
    verb.add_argument("--timeout", type=float, default=CONVERGE_TIMEOUT_S,
                      help="seconds to wait for convergence (default %(default)s)")


CONVERGE_TIMEOUT_S = 120.0


def settle(lab: Lab, args: argparse.Namespace, started: float) -> None:
    """Wait, unless told not to, for every session and loopback route to be back."""
    if not args.no_wait:
        wait_converged(lab, args.timeout)
        out.print(f"{lab.plan.name}: converged again {time.monotonic() - started:.1f} s after "
                  "the undo began", highlight=False)


def _parts(undo: Undo) -> str:
    parts = []
    if undo.ends_down:
        parts.append("down: " + ", ".join(map(str, undo.ends_down)))
    if undo.filters:
        parts.append(f"filter on {len(undo.filters)} node(s): {', '.join(undo.filters[:6])}"
                     + (", ..." if len(undo.filters) > 6 else ""))
    if undo.restart:
        parts.append(f"{undo.restart} stopped")
    if undo.sessions:
        parts.append("re-establishing: " + ", ".join(undo.sessions))
    if undo.impaired:
        parts.append("impaired: " + ", ".join(map(str, undo.impaired)))
    return "; ".join(parts)


def inject(args: argparse.Namespace) -> int:
    require_root()
    lab = open_lab(args.name)
    faults = Faults.in_place(lab, args.faults)
    verb = args.faults.verbs[args.verb]
    started = time.monotonic()
    fault = verb.call(faults, args)
    took_ms = (time.monotonic() - started) * 1000
    if verb.undoes:
        out.print(f"{lab.plan.name}: fault {fault.id} {fault} undone in {took_ms:.0f} ms",
                  highlight=False)
        settle(lab, args, started)
        return 0
    if verb.finish and (finished := verb.finish(faults, fault, args)):
        out.print(f"{lab.plan.name}: {finished}", highlight=False)
        return 0
    again = verb.again(args) if verb.again else f"clear {fault.id}"
    out.print(f"{lab.plan.name}: fault {fault.id} {fault} in place in {took_ms:.0f} ms "
              f"({_parts(fault.record.undo)})\n  undo: labctl fault {lab.plan.name} {again}",
              highlight=False)
    return 0


def show(args: argparse.Namespace) -> int:
    lab = open_lab(args.name)
    records = [f.record for f in Faults.in_place(lab, args.faults).active]
    if args.json:
        print(json.dumps([r.model_dump(mode="json") for r in records], indent=2))
        return 0
    if not records:
        out.print(f"{lab.plan.name}: no faults in place")
        return 0
    table = Table(title=f"faults in place in {lab.plan.name} (oldest first)")
    for column in ("id", "fault", "since"):
        table.add_column(column, no_wrap=True)
    table.add_column("what it holds")
    for r in records:
        since = datetime.fromtimestamp(r.injected_at).strftime("%H:%M:%S")
        table.add_row(str(r.id), str(r), f"{since} ({time.time() - r.injected_at:.0f} s)",
                      _parts(r.undo))
    out.print(table)
    return 0


def clear(args: argparse.Namespace) -> int:
    require_root()
    lab = open_lab(args.name)
    faults = Faults.in_place(lab, args.faults)
    if args.ids:
        known = {f.id: f for f in faults.active}
        unknown = [i for i in args.ids if i not in known]
        if unknown:
            raise LabError(f"{lab.plan.name} has no fault {', '.join(map(str, unknown))} in "
                           f"place; in place: {', '.join(str(i) for i in known) or 'none'}")
        faults.history = [known[i] for i in sorted(args.ids)]
    cleared, started = list(faults.active), time.monotonic()
    faults.undo_all()
    out.print(f"{lab.plan.name}: undid {len(cleared)} fault(s)"
              + (f": {', '.join(map(str, reversed(cleared)))}" if cleared else ""),
              highlight=False)
    if cleared:
        settle(lab, args, started)
    return 0
