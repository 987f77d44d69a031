"""exercise: operator training on a lab broken on purpose (labs/*.yml).

`start` deploys the exercise's lab (named after the exercise), breaks it as its story says and
makes sure its checks see it broken; `hint` shows the next hint, `check` tells which checks
pass (exit 1 until all do), `solve` applies the reference fix (for instructors), `reset`
starts the exercise again from a fresh lab. `labctl destroy NAME` ends it.
"""

from __future__ import annotations

import argparse
import json
import time

from rich.markup import escape
from rich.table import Table

from harness.cli.console import make_console
from harness.cli.lifecycle import as_typed, progress_bars, require_root
from harness.core.errors import CheckFailed, LabError
from harness.core.events import Event, record
from harness.deploy.lab import Lab, deploy, destroy_lab
from harness.runtime import RUNTIMES
from harness.training.attempt import Attempt, begin, open_attempt, running
from harness.training.checks import Result, run_checks, wait_checks
from harness.training.exercise import Exercise, find_exercise, load_exercise, shipped
from harness.training.steps import run_steps
from harness.training.template import Renderer

out = make_console()
DEPLOY_TIMEOUT_S = 180.0


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("exercise", help="operator training: a lab broken on purpose, "
                            "hints, and checks of your fix (labs/)")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("list", help="the exercises, and which run now")
    s = actions.add_parser("start", help="deploy an exercise's lab and break it")
    s.add_argument("exercise", help="an exercise of `list`, or the path of an exercise .yml")
    s.add_argument("--runtime", choices=RUNTIMES, default="netns", help="how nodes run")
    s.add_argument("--timeout", type=float, default=DEPLOY_TIMEOUT_S,
                   help="seconds to wait for the lab to converge before breaking it")
    for action, text in (("hint", "the next hint"),
                         ("check", "which checks pass; exit 1 until all do"),
                         ("solve", "apply the reference fix and wait for the checks"),
                         ("reset", "start the exercise again on a fresh lab")):
        a = actions.add_parser(action, help=text)
        a.add_argument("name", nargs="?", help="the running exercise (default: the only one)")
        if action == "check":
            a.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=exercise)


def exercise(args: argparse.Namespace) -> int:
    if args.action == "list":
        return list_exercises()
    require_root()
    if args.action == "start":
        return start(find_exercise(args.exercise), args.runtime, args.timeout)
    lab, attempt = open_attempt(args.name)
    if args.action == "hint":
        return hint(lab, attempt)
    if args.action == "check":
        return check(lab, attempt, as_json=args.json)
    if args.action == "solve":
        return solve(lab, attempt)
    runtime = lab.runtime.name
    destroy_lab(lab.plan.name)
    return start(attempt.load_exercise(), runtime, DEPLOY_TIMEOUT_S)


def list_exercises() -> int:
    table = Table(title="exercises (labs/): `labctl exercise start NAME`")
    for column in ("name", "title", "topology", "running"):
        table.add_column(column)
    now = set(running())
    for path in shipped():
        ex = load_exercise(path)
        table.add_row(ex.name, ex.title, ex.topology.rsplit("/", 1)[-1],
                      "[green]yes[/]" if ex.name in now else "")
    out.print(table)
    return 0


def start(ex: Exercise, runtime: str, timeout: float) -> int:
    with progress_bars() as progress:
        lab = deploy(ex.topology_file, name=ex.name, runtime=runtime, progress=progress,
                     timeout=timeout)
    try:  # never half an exercise: a lab that could not be broken as told goes
        out.print(f"[bold]breaking lab {ex.name}[/] as the story tells...")
        begin(lab, ex)
        run_steps(lab, ex.setup)
        results = wait_checks(lab, ex.checks, passing=False, timeout=ex.broken_within_s)
        if all(r.ok for r in results):
            raise LabError(f"{ex.source}: after its setup every check still passes "
                           f"({ex.broken_within_s:g} s): the exercise teaches nothing; "
                           "fix its setup or its checks")
    except BaseException:
        destroy_lab(lab.plan.name)
        raise
    me = as_typed()
    out.print(f"\n[bold]{escape(ex.title)}[/]\n\n{escape(ex.story.strip())}\n", soft_wrap=True)
    out.print(f"The lab is [bold]{ex.name}[/] ({me} inspect {ex.name}). Stuck? "
              f"{me} exercise hint {ex.name}   |   Done? {me} exercise check {ex.name}   |   "
              f"Again from the start: {me} exercise reset {ex.name}   |   "
              f"Finished: {me} destroy {ex.name}", highlight=False, soft_wrap=True)
    return 0


def hint(lab: Lab, attempt: Attempt) -> int:
    hints = Renderer(lab.plan).render(attempt.load_exercise().hints)
    if attempt.hints_shown >= len(hints):
        out.print(f"[yellow]no more hints[/] (all {len(hints)} shown):")
        for i, text in enumerate(hints, 1):
            out.print(f"{i}. {escape(text.strip())}", soft_wrap=True)
        return 0
    shown = attempt.next_hint(lab)
    out.print(f"hint {shown.hints_shown} of {len(hints)}: "
              f"{escape(hints[shown.hints_shown - 1].strip())}", soft_wrap=True)
    return 0


def check(lab: Lab, attempt: Attempt, *, as_json: bool = False) -> int:
    ex = attempt.load_exercise()
    results = run_checks(lab, ex.checks)
    solved = all(r.ok for r in results)
    record(lab.dir, [Event(time.time(), "exercise", "passed" if r.ok else "failed", None,
                           {"exercise": ex.name, "check": r.check, "found": r.found})
                     for r in results])
    if solved:
        attempt = attempt.solved(lab)
    if as_json:
        print(json.dumps({"exercise": ex.name, "solved": solved,
                          "solved_after_s": attempt.solved_after_s,
                          "hints_shown": attempt.hints_shown,
                          "checks": [r.__dict__ for r in results]}, indent=2))
    else:
        print_results(ex, results)
        if solved:
            out.print(f"[green]solved[/] in {attempt.solved_after_s:.0f} s with "
                      f"{attempt.hints_shown} of {len(ex.hints)} hints")
    if not solved:
        raise CheckFailed(f"exercise {ex.name}: {sum(not r.ok for r in results)} of "
                          f"{len(results)} checks fail")
    return 0


def print_results(ex: Exercise, results: list[Result]) -> None:
    table = Table(title=f"exercise {ex.name}: {ex.title}")
    for column in ("check", "", "found"):
        table.add_column(column)
    for r in results:
        table.add_row(r.check, "[green]pass[/]" if r.ok else "[red]FAIL[/]", escape(r.found))
    out.print(table)


def solve(lab: Lab, attempt: Attempt) -> int:
    ex = attempt.load_exercise()
    began = time.monotonic()
    for line in run_steps(lab, ex.solution):
        out.print(f"  {escape(line)}", highlight=False, soft_wrap=True)
    results = wait_checks(lab, ex.checks, passing=True, timeout=ex.fixed_within_s)
    print_results(ex, results)
    if not all(r.ok for r in results):
        raise CheckFailed(f"exercise {ex.name}: the reference fix did not pass its checks "
                          f"within {ex.fixed_within_s:g} s")
    out.print(f"[green]checks pass[/] {time.monotonic() - began:.1f} s after the fix")
    return 0
