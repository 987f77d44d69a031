"""srv6: a lab's SRv6 as its switches hold it now: each router's dataplane path (the kernel's
seg6 or the userspace engine), locator and SIDs with their packet counts, and each TE policy
with the path in use, every path's probe state and the packets its SID list encapsulated."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.table import Table

from harness.cli.console import make_console
from harness.cli.labref import add_lab_arguments, open_lab
from harness.core.errors import LabError
from harness.deploy.lab import Lab
from harness.nodes.switch.agent.client import ask
from harness.nodes.switch.render import path_key

out = make_console()


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("srv6", help="SRv6 locators, SIDs and TE policies with their "
                            "live state (path in use, packets)")
    add_lab_arguments(p, "the lab (default: the only lab)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=srv6)


def collect(lab: Lab) -> dict[str, Any]:
    """Each SRv6 router's answer (or why there is none), by node."""
    routers: dict[str, Any] = {}
    for node in lab.plan.nodes:
        if node.locator is None:
            continue
        try:
            routers[node.name] = {"locator": node.locator,
                                  **ask(lab.frr(node.name).workdir, {"cmd": "srv6"})}
        except LabError as exc:
            routers[node.name] = {"locator": node.locator, "error": str(exc)}
    return routers


def _count(row: dict[str, Any], counted: bool) -> str:
    if not counted:
        return "-"
    drops = {k: v for k, v in row.items() if k not in ("behavior", "segments", "segs", "mode",
                                                        "port", "packets", "bytes", "nexthop",
                                                        "oif")}
    return str(row.get("packets", 0)) + "".join(f" ({k} {v})" for k, v in drops.items() if v)


def srv6(args: argparse.Namespace) -> int:
    lab = open_lab(args.name, args.topology)
    if lab.plan.srv6 is None:
        raise LabError(f"lab {lab.plan.name} has no srv6 section")
    routers = collect(lab)
    if args.json:
        print(json.dumps(routers, indent=2))
        return 0
    sids = Table(title=f"lab {lab.plan.name}: SRv6 routers, their SIDs and packets each took")
    for column in ("router", "dataplane", "locator", "SID", "behavior", "via", "packets"):
        sids.add_column(column)
    for node in (n for n in lab.plan.nodes if n.name in routers):
        state = routers[node.name]
        if "error" in state:
            sids.add_row(node.name, f"[red]{state['error']}[/]", node.locator, "", "", "", "")
            continue
        for i, sid in enumerate(node.sids):
            live = state["sids"].get(sid.sid)
            sids.add_row(node.name if i == 0 else "", state["path"] if i == 0 else "",
                         node.locator if i == 0 else "", sid.sid, sid.behavior,
                         f"{sid.iface} {sid.nexthop}" if sid.iface else "",
                         _count(live, state["counted"]) if live else "[red]not programmed[/]")
    out.print(sids)
    policies = Table(title="TE policies: the path in use, how often the policy moved, and each "
                     "path's probes, downs and packets")
    for column in ("policy", "headend", "destination", "moves", "path", "SID list",
                   "probes back", "downs", "state", "packets"):
        policies.add_column(column)
    for policy in lab.plan.srv6.policies:
        state = routers.get(policy.headend, {})
        te = next((p for p in state.get("te", []) if p["name"] == policy.name), None)
        for i, path in enumerate(filter(None, (policy.path, policy.fallback))):
            live = te["paths"][i] if te else None
            used = te is not None and te["active"] == path.hops
            listed = state.get("lists", {}).get(path_key(policy, path), {})
            policies.add_row(
                policy.name if i == 0 else "", policy.headend if i == 0 else "",
                policy.destination if i == 0 else "",
                str(te["moves"]) if te and i == 0 else "", " ".join(path.hops),
                " ".join(path.segments),
                f"{live['received']}/{live['sent']}" if live else "-",
                str(live["downs"]) if live else "-",
                ("[green]in use[/]" if used else "up" if live["up"] else "[red]broken[/]")
                if live else "[red]no agent answer[/]",
                _count(listed, state.get("counted", False)) if listed else "-")
    out.print(policies)
    return 0
