"""netem set/show/clear: change a link's impairments on a running lab, like `clab tools netem`.

`set` replaces the endpoint's whole impairment (options left out are zero), on the egress of
that one endpoint; a topology link's impairment was applied to both of its ends.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from rich.table import Table

from harness.cli.console import make_console
from harness.cli.labref import open_lab
from harness.cli.lifecycle import require_root
from harness.core.errors import LabError
from harness.deploy.lab import Lab, lab_names, plan_of
from harness.links import impair
from harness.topology.plan import Endpoint, Impairment
from harness.topology.units import (
    parse_duration_us,
    parse_percent,
    parse_rate_bps,
)

out = make_console()


def unit(parse: Callable[[str], float]) -> Callable[[str], float]:
    """An argparse type from a unit parser: its ValueError becomes argparse's message."""
    def checked(text: str) -> float:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return checked


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("netem", help="link impairments on a running lab (delay, loss, rate)")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")

    s = verbs.add_parser("set", help="set the egress impairment of one endpoint, live")
    s.add_argument("target", metavar="[LAB/]NODE:IFACE")
    s.add_argument("--delay", type=unit(parse_duration_us), help="one-way delay, e.g. 200us")
    s.add_argument("--jitter", type=unit(parse_duration_us), help="uniform +-, e.g. 20us")
    s.add_argument("--loss", type=unit(parse_percent), help="e.g. 0.1%%")
    s.add_argument("--duplicate", type=unit(parse_percent), help="e.g. 0.1%%")
    s.add_argument("--rate", type=unit(parse_rate_bps), help="e.g. 10Gbit")
    s.set_defaults(run=set_impairment)

    s = verbs.add_parser("show", help="impaired endpoints and the path (netem/userspace) each uses")
    s.add_argument("name", nargs="?", help="lab (default: every lab)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(run=show)

    s = verbs.add_parser("clear", help="remove the impairment of one endpoint, or all of a lab")
    s.add_argument("target", nargs="?", metavar="[LAB/]NODE:IFACE | LAB")
    s.add_argument("--all", action="store_true", help="every impaired endpoint of the lab")
    s.set_defaults(run=clear)


def parse_target(target: str) -> tuple[Lab, Endpoint]:
    lab, _, endpoint = target.rpartition("/")
    node, sep, iface = endpoint.partition(":")
    if not (node and sep and iface):
        raise LabError(f"{target!r} is not an endpoint; write [LAB/]NODE:IFACE, e.g. "
                       "leaf1:eth1")
    return open_lab(lab or None), Endpoint(node=node, iface=iface)


def set_impairment(args: argparse.Namespace) -> int:
    require_root()
    values = (args.delay, args.jitter, args.loss, args.duplicate, args.rate)
    if all(v is None for v in values):
        raise LabError("give at least one of --delay --jitter --loss --duplicate --rate "
                       "(`labctl netem clear` removes an impairment)")
    lab, endpoint = parse_target(args.target)
    impairment = Impairment(delay_us=args.delay or 0.0, jitter_us=args.jitter or 0.0,
                            loss_pct=args.loss or 0.0, duplicate_pct=args.duplicate or 0.0,
                            rate_bps=args.rate)
    backend = impair.apply(lab, endpoint, impairment)
    out.print(f"{lab.plan.name}/{endpoint}: {impairment.describe()} via {backend}",
              highlight=False)
    return 0


def show(args: argparse.Namespace) -> int:
    if args.name:
        labs = [Lab.open(args.name)]
    else:  # every lab this version can read (a lab from another branch's schema is skipped)
        labs = [Lab(plan) for name in lab_names() if (plan := plan_of(name)) is not None]
    rows = [row for lab in labs for row in impair.show(lab)]
    if args.json:
        print(json.dumps([r.to_dict() for r in rows], indent=2))
        return 0
    if not rows:
        out.print("no impaired endpoints")
        return 0
    table = Table(title="link impairments (egress of each endpoint)")
    for column in ("lab", "endpoint", "impairment", "path", "health", "frames in/out/lost",
                   "sent late p50/p99/max"):
        table.add_column(column)
    for r in rows:
        c = r.counters
        frames = f"{c['rx']}/{c['tx']}/{c['lost']}" if c else ""
        # The userspace engine's own account since the last change; netem's timers are the
        # kernel's, which tell nobody.
        late = (f"{c['late_p50_us']}/{c['late_p99_us']}/{c['late_max_us']} us"
                if "late_p50_us" in c else "")
        table.add_row(r.lab, str(r.endpoint), r.impairment.describe(), r.backend,
                      r.health if r.health == "active" else f"[red]{r.health}[/]", frames, late)
    out.print(table)
    return 0


def clear(args: argparse.Namespace) -> int:
    require_root()
    if args.all:
        lab = open_lab(args.target)
        cleared = impair.clear_all(lab)
        out.print(f"{lab.plan.name}: cleared {len(cleared)} endpoint(s)")
        return 0
    if not args.target:
        raise LabError("name an endpoint ([LAB/]NODE:IFACE) or use --all")
    lab, endpoint = parse_target(args.target)
    lab.node(endpoint.node)  # an unknown node is an error, an unimpaired endpoint is not
    impair.clear(lab, endpoint)
    out.print(f"{lab.plan.name}/{endpoint}: clean")
    return 0
