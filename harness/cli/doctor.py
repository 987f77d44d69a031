"""doctor: which kernel features and tools this host has, and what fabric-lab does without them."""

from __future__ import annotations

import argparse
import json
import platform
from dataclasses import asdict

from rich.table import Table

from harness.cli.console import make_console
from harness.kernel import features, tools
from harness.links.impair.backend import describe_path
from harness.linux import ksm

out = make_console()

CONSEQUENCE = {
    "netem": "impaired links use the userspace impairment path",
    "tc_redirect": "no userspace impairment path either",
    "fq": "no pacing qdisc; rate limits use htb/tbf",
    "fq_codel": "no AQM qdisc on links",
    "vrf": "no VRF-based tenant separation",
    "openvswitch": "links are veth pairs (no OVS bridges needed)",
    "mpls": "no MPLS forwarding; backbones use SRv6",
    "seg6": "no SRv6 encapsulation: RBB labs cannot steer traffic",
    "seg6local": "no SRv6 End/End.X: RBB labs cannot steer traffic",
    "nexthop_groups": "weighted ECMP is unavailable to the SAI dataplane",
}


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("doctor", help="kernel features and tools on this host")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=doctor)


def memory_sharing() -> str:
    """Whether big labs can share their memory here (harness/linux/ksm.py)."""
    why = ksm.unsupported()
    return f"no: {why}" if why else ("yes (KSM; `deploy --share-memory auto` shares a lab "
                                     "whose FRR nodes would take over a quarter of the memory "
                                     "available)")


def doctor(args: argparse.Namespace) -> int:
    feats, found = features(), tools()
    if args.json:
        print(json.dumps({"kernel": platform.release(), "features": [asdict(f) for f in feats],
                          "tools": [asdict(t) for t in found],
                          "impairment_path": describe_path(),
                          "memory_sharing": memory_sharing()}, indent=2))
        return 0
    table = Table(title=f"kernel {platform.release()}: features (each probed in a scratch netns)")
    for column in ("feature", "available", "detail / consequence"):
        table.add_column(column)
    for f in feats:
        detail = f.detail if f.available else f"{f.detail} -> {CONSEQUENCE.get(f.name, '')}"
        table.add_row(f.name, "[green]yes[/]" if f.available else "[red]no[/]", detail)
    out.print(table)
    table = Table(title="tools")
    for column in ("tool", "path", "version"):
        table.add_column(column)
    for t in found:
        table.add_row(t.name, t.path or "[red]missing[/]", t.version)
    out.print(table)
    out.print(f"impaired links will use: {describe_path()}", highlight=False)
    out.print(f"big labs can share their memory: {memory_sharing()}", highlight=False)
    return 0
