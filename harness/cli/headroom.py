"""headroom: each long-haul port of a lab's SAI switches, its cable as the topology says and
as the switch measured it (harness/nodes/switch/agent/cable.py), the PFC headroom set from the
measurement, and what provisioning every such port for the lab's longest cable would reserve
instead."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.table import Table

from harness.cli.console import make_console
from harness.cli.labref import add_lab_arguments, open_lab
from harness.deploy.lab import Lab
from harness.nodes.switch.agent.client import ask
from harness.nodes.switch.kind import SaiKind
from harness.nodes.switch.sai.headroom import for_km
from harness.topology.plan import Endpoint

out = make_console()
MEASURE_TIMEOUT_S = 120.0  # a port takes about a second; a BAG switch has a dozen


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("headroom", help="long-haul cables measured by the switches, and "
                            "the PFC headroom set from them")
    add_lab_arguments(p, "the lab (default: the only lab)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=headroom)


def measure(lab: Lab) -> list[dict[str, Any]]:
    """Every SAI switch's ports whose link has a length and a SAI switch at its far end,
    measured now; each row with the configured length and the worst case beside it."""
    longest = max((link.distance_km or 0 for link in lab.plan.links), default=0)
    rows = []
    for node in lab.plan.nodes:
        if not isinstance(lab.kind(node.name), SaiKind):
            continue
        lengths = {i.name: lab.plan.link_at(Endpoint(node=node.name, iface=i.name)).distance_km
                   for i in node.interfaces if isinstance(lab.kind(i.peer.node), SaiKind)}
        ports = {name: km for name, km in lengths.items() if km}
        if not ports:
            continue
        for row in ask(lab.frr(node.name).workdir, {"cmd": "cable", "ports": list(ports)},
                       timeout=MEASURE_TIMEOUT_S):
            rate = row.get("speed_mbps", 0) * 1_000_000
            rows.append({"node": node.name, **row, "configured_km": ports[row["port"]],
                         "worst_case_bytes": for_km(longest, rate).bytes if rate else None})
    return rows


def headroom(args: argparse.Namespace) -> int:
    lab = open_lab(args.name, args.topology)
    rows = measure(lab)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    table = Table(title=f"lab {lab.plan.name}: long-haul cables and their PFC headroom")
    for column in ("node", "port", "peer", "configured km", "measured km", "speed",
                   "headroom", "worst case"):
        table.add_column(column)
    for r in rows:
        measured = r.get("km")
        table.add_row(r["node"], r["port"], r.get("peer", "-"), f"{r['configured_km']:g}",
                      "-" if measured is None else f"{measured:g}",
                      f"{r['speed_mbps'] // 1000}G" if "speed_mbps" in r else "-",
                      _mb(r.get("headroom_bytes")), _mb(r.get("worst_case_bytes")))
    out.print(table)
    used = sum(r.get("headroom_bytes") or 0 for r in rows)
    worst = sum(r.get("worst_case_bytes") or 0 for r in rows if r.get("headroom_bytes"))
    if used:
        out.print(f"headroom set from the measurements: {_mb(used)}; provisioning every port "
                  f"for the longest cable: {_mb(worst)} ({worst / used:.1f}x)")
    return 0


def _mb(value: int | None) -> str:
    return "-" if value is None else f"{value / 1e6:.2f} MB"
