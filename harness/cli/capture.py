"""capture: one pcapng across a running lab's ports, both directions, in time order
(harness/instruments/capture.py). `-w -` streams it, for `wireshark -k -i -`."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from typing import BinaryIO

from harness.cli.console import make_console
from harness.cli.labref import open_lab
from harness.cli.lifecycle import require_root
from harness.core.errors import LabError, UsageError
from harness.deploy.lab import Lab
from harness.instruments.capture import SNAPLEN, Capture, Summary, select_ports
from harness.topology.plan import Endpoint

err = make_console(stderr=True)  # stdout may be the capture itself


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("capture", help="capture ports of a running lab into one pcapng, "
                            "both directions, merged by kernel timestamp")
    p.add_argument("name", metavar="LAB")
    p.add_argument("targets", nargs="*", metavar="PORTS",
                   help="NODE:PORT (one port), NODE or a pattern like 'leaf*' (each of its "
                        "ports), NODE--NODE (both ends of every link between them)")
    p.add_argument("--plane", type=int, action="append", default=[], metavar="N",
                   help="both ends of every link into or inside plane N (repeatable)")
    p.add_argument("-f", "--filter", default="", metavar="EXPR",
                   help="a tcpdump filter expression, e.g. 'udp port 3784'")
    p.add_argument("-c", "--count", type=int, metavar="N", help="stop after N frames")
    p.add_argument("-d", "--duration", type=float, metavar="SECONDS", help="stop after SECONDS")
    p.add_argument("-s", "--snaplen", type=int, default=SNAPLEN, metavar="BYTES",
                   help=f"bytes kept of each frame (default {SNAPLEN})")
    p.add_argument("-w", "--write", metavar="FILE", help="the pcapng to write, '-' for stdout "
                   "(default: captures/TIME.pcapng in the lab's directory)")
    p.set_defaults(run=capture)


def capture(args: argparse.Namespace) -> int:
    require_root()
    if (args.count is not None and args.count < 1) or args.snaplen < 64:
        raise UsageError("--count takes 1 or more frames and --snaplen 64 or more bytes")
    lab = open_lab(args.name)
    ports = select_ports(lab.plan, args.targets, args.plane)
    if args.write == "-":
        return _run(lab, ports, sys.stdout.buffer, "stdout", args)
    path = Path(args.write) if args.write else \
        lab.dir / "captures" / time.strftime("%Y%m%d-%H%M%S.pcapng")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        out = path.open("wb")
    except OSError as exc:
        raise LabError(f"cannot write the capture to {path}: {exc.strerror}") from None
    with out:
        return _run(lab, ports, out, str(path), args)


def _run(lab: Lab, ports: list[Endpoint], out: BinaryIO, where: str,
         args: argparse.Namespace) -> int:
    """Ctrl-C and SIGTERM end the capture between frames, so the file ends whole."""
    signalled: list[int] = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda signum, _: signalled.append(signum))
    with Capture(lab, ports, out, expression=args.filter, snaplen=args.snaplen) as cap:
        listened = ", ".join(f"{port} ({count.listened})" for port, count in cap.counts.items())
        err.print(f"capturing on {len(ports)} ports of {args.name}"
                  f"{f' ({args.filter})' if args.filter else ''}: {listened}; Ctrl-C stops",
                  highlight=False, soft_wrap=True)
        summary = cap.run(count=args.count, seconds=args.duration, stop=lambda: bool(signalled))
    if summary.stopped_by == "the reader went away":  # no flush at exit into a closed pipe
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    _report(summary, where)
    return 0


def _report(summary: Summary, where: str) -> None:
    per_port = ", ".join(f"{port} {count.frames}" for port, count in summary.ports.items())
    lost = ""
    if summary.dropped:
        lost += f"; {summary.dropped} dropped by the kernel (its queue was full)"
    if summary.late:
        lost += f"; {summary.late} written out of order (read past the reorder window)"
    err.print(f"{summary.frames} frames to {where} ({per_port}); stopped by "
              f"{summary.stopped_by}{lost}", highlight=False, soft_wrap=True)
