"""validate: a running lab's performance against a profile, as a cloud partner validates a
cluster before handing it over; or, with -t FILE, a topology checked without deploying it.

Exit 0 when every check passed, 1 naming the checks that failed, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter

from rich.table import Table

from harness.cli.console import make_console
from harness.cli.labref import open_lab
from harness.cli.lifecycle import require_root
from harness.core.errors import CheckFailed, UsageError
from harness.fabrics.scaleup import nonblocking
from harness.linux.features import neighbour_room
from harness.nodes.rdma.engine import TRANSPORTS
from harness.topology.pipeline import plan_from_file
from harness.topology.schema import Role
from harness.topology.units import format_bytes
from harness.validation.checks import Verdict, judge_all
from harness.validation.profile import DEFAULT, load_profile
from harness.validation.run import Validation, validate

out = make_console()


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("validate", help="a lab's point-to-point and collective "
                            "performance against a profile; -t FILE: a topology, undeployed")
    p.add_argument("name", nargs="?", metavar="NAME|FILE", help="the running lab to validate")
    p.add_argument("-t", "--topo", metavar="FILE",
                   help="check this topology file without deploying it")
    p.add_argument("--profile", default=str(DEFAULT),
                   help="sizes, tiers, collectives and thresholds (default: %(default)s)")
    p.add_argument("--transport", choices=TRANSPORTS,
                   help="move the payloads as RDMA writes over fl-rdma (roce: RC with DCQCN; "
                   "metaroce: multipath) instead of TCP sockets")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=run)


def check_topology(path: str) -> int:
    plan = plan_from_file(path)
    kinds = Counter(n.kind.value for n in plan.nodes)
    out.print(f"{path}: valid: lab {plan.name}, {len(plan.nodes)} nodes "
              f"({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}), "
              f"{len(plan.links)} links, {len(plan.sessions)} BGP sessions, runtime "
              f"{plan.runtime}", highlight=False, soft_wrap=True)
    if any(n.role is Role.scaleup for n in plan.nodes):
        problems = nonblocking(plan)
        switches = sum(n.role is Role.scaleup for n in plan.nodes)
        verdict = ("[red]not non-blocking:[/] " + "; ".join(problems) if problems else
                   f"non-blocking: each accelerator pair has one equal path through each of "
                   f"{switches} switches")
        out.print(verdict, highlight=False, soft_wrap=True)
    room = neighbour_room(plan)
    if room:
        out.print(f"[yellow]on this host:[/] {room}", highlight=False)
    return 0


def print_tables(result: Validation, verdicts: list[Verdict]) -> None:
    pairs = Table(title=f"{result.lab}: point to point over {result.transport} (64 B round "
                  "trips, one-way stream)")
    for column in ("pair", "rtt p50 us", "rtt p99 us", "GB/s"):
        pairs.add_column(column, justify="right" if column != "pair" else "left")
    for p in result.pairs:
        pairs.add_row(f"{p.a} -> {p.b}", f"{p.rtt_p50_us:.0f}", f"{p.rtt_p99_us:.0f}",
                      f"{p.p2p_GBps:.3f}")
    out.print(pairs)
    rows = Table(title=f"{result.lab}: collectives (time: the slowest rank, median of "
                 "iterations; bandwidths as nccl-tests defines them)")
    for column in ("tier", "collective", "size", "time us", "algbw GB/s", "busbw GB/s",
                   "result"):
        rows.add_column(column, justify="left" if column in ("tier", "collective") else
                        "right")
    for r in result.rows:
        rows.add_row(f"{r.tier} ({r.hosts})", r.collective, format_bytes(r.size),
                     f"{r.time_us:.0f}", f"{r.algbw_GBps:.4f}", f"{r.busbw_GBps:.4f}",
                     "ok" if r.ok else "[red]WRONG[/]")
    out.print(rows)
    for note in result.notes:
        out.print(f"note: {note}", highlight=False)
    for v in verdicts:
        mark = "[green]pass[/]" if v.ok else "[red]FAIL[/]"
        out.print(f"{mark} {v.check} ({v.measured} measured)", highlight=False)
        for failure in v.failures:
            out.print(f"     {failure}", highlight=False)


def run(args: argparse.Namespace) -> int:
    if args.topo:
        if args.name:
            raise UsageError("validate NAME runs a lab's tests; validate -t FILE checks a "
                             "topology: give one")
        return check_topology(args.topo)
    require_root()
    profile = load_profile(args.profile)  # a bad profile is refused before anything runs
    lab = open_lab(args.name)
    result = validate(lab, profile, args.transport)
    verdicts = judge_all(profile, result)
    if args.json:
        print(json.dumps({**result.to_dict(), "profile": args.profile,
                          "checks": [v.__dict__ for v in verdicts],
                          "passed": all(v.ok for v in verdicts)}, indent=1))
    else:
        print_tables(result, verdicts)
    failed = [v.check for v in verdicts if not v.ok]
    if failed:
        raise CheckFailed(f"{lab.plan.name}: {len(failed)} of {len(verdicts)} checks failed: "
                          + "; ".join(failed))
    return 0
