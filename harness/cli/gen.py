"""gen: write a topology file for a parametric fabric (FPF today)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.console import make_console
from harness.fabrics.fpf import (
    BFD_ENGINES,
    DEFAULT_LEAF_RADIX,
    SWITCH_KINDS,
    FpfParams,
    render,
)

out = make_console(stderr=True)


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("gen", help="generate a topology file for a fabric")
    fabrics = p.add_subparsers(dest="fabric", required=True, metavar="FABRIC")
    f = fabrics.add_parser("fpf", help="Flattened Planar Fabric: independent planes, one host "
                           "NIC per plane")
    f.add_argument("--planes", type=int, default=8)
    f.add_argument("--leaves-per-plane", type=int, required=True)
    f.add_argument("--spines-per-plane", type=int, required=True)
    f.add_argument("--hosts", type=int, required=True)
    f.add_argument("--leaf-radix", type=int, default=DEFAULT_LEAF_RADIX,
                   help=f"ports per leaf (default {DEFAULT_LEAF_RADIX})")
    f.add_argument("--host-echo", metavar="INTERVAL",
                   help="BFD echo on host links, e.g. 50ms (default: control packets only)")
    f.add_argument("--switch-kind", choices=SWITCH_KINDS, default=SWITCH_KINDS[0],
                   help="sai: FRR over the SAI agent, as FPF switches run (default); frr: "
                   "plain FRR routers")
    f.add_argument("--bfd", choices=BFD_ENGINES, default=BFD_ENGINES[0],
                   help="offload: each node's BFD sessions run in its fl-bfd, one wake-up per "
                   "tick (default); bfdd: in bfdd's own packet loop")
    f.add_argument("--name", help="lab name (default fpf-<hosts>h)")
    f.add_argument("-o", "--output", help="write to this file instead of stdout")
    f.set_defaults(run=gen_fpf)


def gen_fpf(args: argparse.Namespace) -> int:
    text = render(FpfParams(planes=args.planes, leaves_per_plane=args.leaves_per_plane,
                            spines_per_plane=args.spines_per_plane, hosts=args.hosts,
                            leaf_radix=args.leaf_radix, name=args.name,
                            host_echo=args.host_echo, switch_kind=args.switch_kind,
                            bfd=args.bfd))
    if args.output:
        Path(args.output).write_text(text)
        out.print(f"wrote {args.output}")
    else:
        print(text, end="")
    return 0
