"""labctl: the command line. Each command group is one module with a `register` function."""

from __future__ import annotations

import argparse
import gc
import signal
from collections.abc import Sequence
from importlib.metadata import version
from types import FrameType

from rich.markup import escape

from harness.cli import (
    access,
    ansible,
    capture,
    doctor,
    events,
    exercise,
    export,
    fault,
    gen,
    graph,
    headroom,
    inspect,
    lifecycle,
    netem,
    platform,
    rdma,
    sai,
    scenario,
    serve,
    srv6,
    validate,
)
from harness.cli.console import make_console
from harness.core.errors import CheckFailed, FabricLabError

COMMAND_GROUPS = (lifecycle, inspect, access, graph, export, doctor, validate, fault, netem,
                  capture, events, scenario, serve, rdma, sai, srv6, headroom, platform, gen,
                  ansible, exercise)
console = make_console(stderr=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="labctl", description="Deploy, break and inspect emulated AI data-center fabrics.")
    parser.add_argument("--version", action="version",
                        version=f"labctl (fabric-lab) {version('fabric-lab')}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in COMMAND_GROUPS:
        group.register(commands)
    return parser


def _chosen(parser: argparse.ArgumentParser,
            args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)command parser the arguments reached: `labctl fault X clear`'s for them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = getattr(args, action.dest, None)
            if chosen in action.choices:
                return _chosen(action.choices[chosen], args)
    return parser


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """Arguments a subcommand does not know are reported with that subcommand's usage, not
    labctl's (argparse would leave them to the top parser)."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        _chosen(parser, args).error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def _terminate(signum: int, frame: FrameType | None) -> None:
    """SIGTERM unwinds like Ctrl-C, so a deploy being stopped rolls itself back."""
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    signal.signal(signal.SIGTERM, _terminate)
    # What exists by now (modules, the parser) lives as long as the process: frozen, the
    # collector no longer walks it while the command runs, and frozen again at the end, what
    # the command made (a lab's plan) is not walked at exit either. `inspect` on fpf-64 takes
    # ~0.25 s less (bench/scale.py's inspect column).
    gc.freeze()
    try:
        return int(args.run(args) or 0)
    except CheckFailed as exc:  # the lab is there, a check on it failed: exit 1
        console.print(f"[bold red]failed:[/] {escape(str(exc))}", highlight=False,
                      soft_wrap=True)
        return 1
    except FabricLabError as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return 2
    except KeyboardInterrupt:
        console.print("[yellow]interrupted; everything this command created was removed[/]")
        return 130
    finally:
        gc.freeze()

