"""rdma: RDMA writes between lab hosts over fl-rdma, with perftest's habits.

`labctl rdma LAB SRC DST` is ib_write_bw between two hosts; SRC may name several hosts (an
incast onto DST), and `--all-to-all` runs every ordered pair of the hosts named. Each run
prints perftest's columns and the transports' counters: sent, resent, duplicates, out of
order, timeouts, NAKs, CE marks, CNPs, ECN echoes and the time the NICs stood paused.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

from rich.table import Table

from harness.cli.console import make_console
from harness.cli.labref import add_lab_arguments, open_lab
from harness.cli.lifecycle import require_root
from harness.cli.netem import unit
from harness.core.errors import LabError
from harness.nodes.rdma.engine import TRANSPORTS, Settings
from harness.topology.units import parse_bytes, parse_duration_us, parse_rate_bps
from harness.traffic.rdma import Run, hosts_of, lab_rate_bps, rdma

out = make_console()


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("rdma", help="RDMA writes between hosts (RoCEv2 RC with DCQCN, or "
                            "the multipath transport), perftest-style")
    add_lab_arguments(p, "the lab")
    p.add_argument("src", metavar="SRC[,SRC...]", help="sending host(s); several: an incast")
    p.add_argument("dst", metavar="DST", nargs="?", help="receiving host (not with --all-to-all)")
    p.add_argument("--all-to-all", action="store_true",
                   help="every ordered pair of the SRC hosts sends")
    p.add_argument("--transport", choices=TRANSPORTS, default="metaroce",
                   help="roce: RC go-back-N with DCQCN, relying on PFC; metaroce: multipath, "
                   "SACK and selective resend, ECN AIMD (default)")
    p.add_argument("--size", type=unit(parse_bytes), default=65536, help="message size (64K)")
    p.add_argument("--iterations", "-n", type=int, default=100, help="messages per QP")
    p.add_argument("--duration", type=unit(parse_duration_us),
                   help="run this long instead of a number of messages, e.g. 2s")
    p.add_argument("--qps", type=int, default=1, help="QPs per destination")
    p.add_argument("--paths", type=int, default=8, help="metaroce: paths per QP")
    p.add_argument("--mtu", type=int, default=1024, help="RoCE MTU (payload bytes per packet)")
    p.add_argument("--rate", type=unit(parse_rate_bps),
                   help="each NIC's line rate (default: the links' bandwidth, else 100M)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=rdma_command)


def pairs_of(src: str, dst: str | None, all_to_all: bool) -> list[tuple[str, str]]:
    sources = [s for s in src.split(",") if s]
    if all_to_all:
        if dst is not None or len(sources) < 2:
            raise LabError("--all-to-all takes two or more hosts as SRC and no DST")
        return [(a, b) for a in sources for b in sources if a != b]
    if dst is None:
        raise LabError("give a DST host (or --all-to-all with several SRC hosts)")
    if dst in sources:
        raise LabError(f"{dst} is both a source and the destination")
    return [(s, dst) for s in sources]


def rdma_command(args: argparse.Namespace) -> int:
    require_root()
    if args.topology is not None and args.name is not None:  # -t FILE: no NAME among them
        if args.dst is not None:
            raise LabError("with -t FILE give SRC and DST only")
        args.name, args.src, args.dst = None, args.name, args.src
    lab = open_lab(args.name, args.topology)
    pairs = pairs_of(args.src, args.dst, args.all_to_all)
    hosts = hosts_of(lab, pairs)
    settings = Settings(transport=args.transport, size=args.size,
                        iterations=0 if args.duration else args.iterations,
                        duration_ms=int((args.duration or 0) // 1000), qps=args.qps,
                        paths=args.paths, mtu=args.mtu)
    rate = args.rate or lab_rate_bps(lab, hosts)
    if rate:
        settings = replace(settings, rate_bps=rate)
    result = rdma(lab, pairs, settings)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        show(result)
    return 1 if result.counters()["errors"] else 0


def show(result: Run) -> None:
    perf = Table(title=f"RDMA write, {result.settings.transport}, "
                 f"{len(result.flows)} QP(s)")
    for column in result.perftest():
        perf.add_column(column, justify="right")
    perf.add_row(*(f"{v:.6g}" for v in result.perftest().values()))
    out.print(perf)
    flows = Table(title="per QP")
    for column in ("src", "dst", "QP", "Gbit/s", "sent", "resent", "timeouts", "CNPs",
                   "ECN echoes", "state"):
        flows.add_column(column)
    for f in result.flows:
        r = f.requester
        flows.add_row(f.src, f.dst, str(r.qpn), f"{f.goodput_bps() / 1e9:.4f}", str(r.sent),
                      str(r.retransmitted), str(r.timeouts), str(r.cnps), str(r.ecn_echoes),
                      "error: retry exceeded" if r.error else "ok")
    out.print(flows)
    out.print("counters: " + ", ".join(f"{k} {v}" for k, v in result.counters().items()))
    held = {h: result.held_s(h) for h in result.senders}
    if any(held.values()):
        out.print("the host held the sending engines past their due times: " + ", ".join(
            f"{h} {s * 1e3:.1f} ms ({s / result.seconds():.1%})" for h, s in held.items())
            + f"; per second of line time they had: {result.line_goodput_bps() / 1e9:.4f} "
            "Gbit/s")
