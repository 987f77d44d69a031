"""scenario: run a file of timed faults and expectations on a lab under a flow, judged and
written as JUnit (harness/testing/scenario.py); `--seed` replays the same random choices."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from harness.cli.console import make_console
from harness.cli.labref import open_lab
from harness.cli.lifecycle import require_root
from harness.core.errors import CheckFailed
from harness.testing.scenario import Run, load_scenario, write_junit

out = make_console()


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("scenario", help="timed faults and expectations from a file, "
                            "under a flow, judged as JUnit")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    s = verbs.add_parser("run", help="run a scenario file on a running lab")
    s.add_argument("name", metavar="LAB")
    s.add_argument("file", metavar="FILE", help="the scenario (scenarios/*.yml)")
    s.add_argument("--seed", type=int, default=1, help="draws the random choices (default 1)")
    s.add_argument("--junit", metavar="FILE", help="default: scenarios/NAME-seed-N.xml in the "
                   "lab's directory")
    s.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    require_root()
    scenario = load_scenario(args.file)  # a bad file is an error before the lab is touched
    lab = open_lab(args.name)
    attempt = Run(lab, scenario, args.seed)
    out.print(f"{scenario.name} on {lab.plan.name}, seed {args.seed}: "
              + (", ".join(f"{k} = {v}" for k, v in attempt.drawn.items()) or "no choices"),
              highlight=False)
    started = time.monotonic()
    verdicts = attempt.run()
    junit = Path(args.junit) if args.junit else \
        lab.dir / "scenarios" / f"{scenario.name}-seed-{args.seed}.xml"
    junit.parent.mkdir(parents=True, exist_ok=True)
    write_junit(junit, scenario, args.seed, verdicts)
    for v in verdicts:
        mark = "[green]pass[/]" if v.ok else "[red]FAIL[/]"
        out.print(f"{mark} {v.at_s:>5g}s  {v.step}: {v.found}", highlight=False)
    failed = sum(not v.ok for v in verdicts)
    out.print(f"{len(verdicts) - failed} of {len(verdicts)} passed in "
              f"{time.monotonic() - started:.1f} s; JUnit: {junit}", highlight=False)
    if failed:
        raise CheckFailed(f"scenario {scenario.name} (seed {args.seed}): {failed} failed")
    return 0
