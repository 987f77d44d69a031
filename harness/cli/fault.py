"""fault: break a running lab from the shell and put it back, as operators do.

What is injected is kept in the lab dir (harness/faults/registry.py), so `list` in a second
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
from harness.core.errors import LabError, UsageError
from harness.deploy.converge import wait_converged
from harness.deploy.lab import Lab
from harness.faults import Fault, Faults
from harness.faults.registry import Undo
from harness.faults.targets import select_nodes
from harness.topology.units import parse_percent

out = make_console()


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("fault", help="inject a fault into a running lab, list, clear")
    p.add_argument("name", metavar="NAME|FILE", help="the lab, or the topology file naming it")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")

    def verb(name: str, help_text: str, *arguments: tuple[str, str]) -> argparse.ArgumentParser:
        s = verbs.add_parser(name, help=help_text, description=help_text)
        for argument, argument_help in arguments:
            s.add_argument(argument, help=argument_help)
        s.set_defaults(run=inject)
        return s

    link = ("link", "one end 'node:iface' or a link 'nodeA--nodeB'")
    verb("link-down", "cut a link: both ends lose carrier", link)
    verb("link-up", "bring a cut link back", link)
    for name, help_text in (("plane-down", "blackhole every switch of a plane (links stay up)"),
                            ("plane-up", "bring a plane back")):
        verb(name, help_text).add_argument("plane", type=int, help="the plane number")
    crash = verb("node-crash", "kill every process of a node", ("node", "the node"))
    crash.add_argument("--forwarding", action="store_true",
                       help="a control-plane crash: the kernel FIB keeps forwarding")
    verb("node-restart", "restart a crashed node", ("node", "the node"))
    reset = verb("bgp-reset", "hard-reset a node's BGP sessions", ("node", "the node"))
    reset.add_argument("--peer", help="only the sessions to this node")
    reset.add_argument("--no-wait", action="store_true",
                       help="return at once (the fault stays listed until `clear`)")
    verb("partition", "nodes of A and of B exchange nothing",
         ("a", "names or patterns, e.g. 'r1-*,bag1'"), ("b", "the other side, the same way"))
    gray = verb("gray-loss", "drop a share of packets silently, links up")
    gray.add_argument("link", nargs="?", help=link[1])
    gray.add_argument("--plane", type=int, help="every host-facing port of this plane instead")
    gray.add_argument("--loss", required=True, type=_percent, help="e.g. 2%%")

    s = verbs.add_parser("list", help="the faults in place now, whoever injected them")
    s.add_argument("--json", action="store_true")
    s.set_defaults(run=show)
    what = "undo faults, newest first: all, or these ids"
    s = verbs.add_parser("clear", help=what, description=what)
    s.add_argument("ids", nargs="*", type=int, metavar="ID")
    s.set_defaults(run=clear)
    for undoing in (*UNDOING, "clear"):
        v = verbs.choices[undoing]
        v.description = f"{v.description}; returns once the lab has converged again"
        v.add_argument("--no-wait", action="store_true", help="return once it is undone")
        v.add_argument("--timeout", type=float, default=CONVERGE_TIMEOUT_S,
                       help="seconds to wait for convergence (default %(default)s)")


def _percent(text: str) -> float:
    try:
        return parse_percent(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _gray_loss(faults: Faults, args: argparse.Namespace) -> Fault:
    if (args.link is None) == (args.plane is None):
        raise UsageError("gray-loss takes a LINK or --plane N (one of them)")
    if args.plane is not None:
        return faults.plane_loss(args.plane, args.loss)
    return faults.link_loss(args.link, args.loss)


# verb -> (what it does, the verb that undoes it and its argument; None: `clear ID`)
ACTIONS = {
    "link-down": (lambda f, a: f.link_down(a.link), lambda a: f"link-up {a.link}"),
    "link-up": (lambda f, a: f.link_up(a.link), None),
    "plane-down": (lambda f, a: f.plane_down(a.plane), lambda a: f"plane-up {a.plane}"),
    "plane-up": (lambda f, a: f.plane_up(a.plane), None),
    "node-crash": (lambda f, a: f.node_crash(a.node, forwarding=a.forwarding),
                   lambda a: f"node-restart {a.node}"),
    "node-restart": (lambda f, a: f.node_restart(a.node), None),
    "bgp-reset": (lambda f, a: f.bgp_reset(a.node, a.peer), None),
    "partition": (lambda f, a: f.partition(select_nodes(f.lab.plan, a.a),
                                           select_nodes(f.lab.plan, a.b)), None),
    "gray-loss": (_gray_loss, None),
}
UNDOING = ("link-up", "plane-up", "node-restart")
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
    faults = Faults.in_place(lab)
    do, undo_verb = ACTIONS[args.verb]
    started = time.monotonic()
    fault = do(faults, args)
    took_ms = (time.monotonic() - started) * 1000
    if args.verb in UNDOING:
        out.print(f"{lab.plan.name}: fault {fault.id} {fault} undone in {took_ms:.0f} ms",
                  highlight=False)
        settle(lab, args, started)
        return 0
    if args.verb == "bgp-reset" and not args.no_wait:
        faults.undo(fault)
        out.print(f"{lab.plan.name}: {fault}: sessions Established again "
                  f"{(time.monotonic() - started):.1f} s after the reset", highlight=False)
        return 0
    again = undo_verb(args) if undo_verb else f"clear {fault.id}"
    out.print(f"{lab.plan.name}: fault {fault.id} {fault} in place in {took_ms:.0f} ms "
              f"({_parts(fault.record.undo)})\n  undo: labctl fault {lab.plan.name} {again}",
              highlight=False)
    return 0


def show(args: argparse.Namespace) -> int:
    lab = open_lab(args.name)
    records = [f.record for f in Faults.in_place(lab).active]
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
    faults = Faults.in_place(lab)
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
