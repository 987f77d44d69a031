"""sai: look inside a switch's SAI dataplane and break it on purpose.

`labctl sai [LAB/]NODE dump|counters|trace|status|fault|restart|apply|config`. Everything
goes through the node's agent control socket. `apply` makes the switch hold its configuration
document (NODE_DIR/sai-config.json, harness/nodes/switch/agent/config.py); `--dry-run` shows the
diff.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.table import Table

from harness.cli.access import lab_and_node
from harness.cli.console import make_console
from harness.core.errors import LabError
from harness.deploy.lab import Lab
from harness.nodes.switch.agent.client import ask
from harness.nodes.switch.kind import SaiKind, restart_agent
from harness.nodes.switch.sai.capacity import TABLES
from harness.nodes.switch.sai.faults import APIS
from harness.nodes.switch.sai.status import Status
from harness.nodes.switch.sai.types import ObjectType

out = make_console()


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("sai", help="a switch's SAI objects, counters, call log and faults")
    p.add_argument("node", help="NODE or LAB/NODE (a kind: sai switch)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    d = actions.add_parser("dump", help="SAI objects and their attributes")
    d.add_argument("--type", dest="types", action="append", choices=ObjectType.__members__,
                   metavar="TYPE", help="only this object type (repeatable), e.g. ROUTE_ENTRY")
    actions.add_parser("counters", help="per-port and per-queue counters")
    t = actions.add_parser("trace", help="the last SAI calls, readable")
    t.add_argument("-n", "--lines", type=int, default=40)
    actions.add_parser("status", help="agent health: FPM session, routes, failures")
    f = actions.add_parser("fault", help="make SAI calls fail, or shrink a table")
    kinds = f.add_subparsers(dest="fault", required=True, metavar="FAULT")
    fail = kinds.add_parser("fail", help="fail an API at a rate: fail create --type ROUTE_ENTRY "
                            "--rate 0.5")
    fail.add_argument("api", choices=APIS)
    fail.add_argument("--type", default="*", choices=["*", *ObjectType.__members__],
                      metavar="TYPE", help="object type (default: every type)")
    fail.add_argument("--rate", type=float, required=True, help="fraction of calls, 0..1")
    fail.add_argument("--status", default="FAILURE", choices=[s.name for s in Status if s],
                      metavar="STATUS", help="status returned (default FAILURE)")
    shrink = kinds.add_parser("shrink", help="shrink a table: shrink routes 10")
    shrink.add_argument("table", choices=sorted(TABLES))
    shrink.add_argument("size", type=int)
    kinds.add_parser("clear", help="remove every fault and restore the table sizes")
    actions.add_parser("restart", help="warm-restart the agent (kill -9, start, reconcile)")
    a = actions.add_parser("apply", help="apply the node's configuration document "
                           "(sai-config.json in its directory): only what changed")
    a.add_argument("--dry-run", action="store_true", help="show the changes, make none")
    actions.add_parser("config", help="where the configuration document is and what of it "
                       "the switch holds")
    p.set_defaults(run=sai)


def sai_switch(target: str) -> tuple[Lab, str]:
    lab, node = lab_and_node(target)
    if not isinstance(lab.kind(node), SaiKind):
        switches = ", ".join(n for n in lab.node_names if isinstance(lab.kind(n), SaiKind))
        raise LabError(f"{node} is kind {lab.kind(node).name}, not sai; SAI switches of this "
                       f"lab: {switches or 'none'}")
    return lab, node


def _request(args: argparse.Namespace) -> dict[str, Any]:
    if args.action == "dump":
        return {"cmd": "dump", "types": args.types}
    if args.action == "trace":
        return {"cmd": "trace", "lines": args.lines}
    if args.action == "apply":
        return {"cmd": "apply", "dry_run": args.dry_run}
    if args.action != "fault":
        return {"cmd": args.action}
    if args.fault == "fail":
        return {"cmd": "fault", "action": "fail", "api": args.api, "object_type": args.type,
                "rate": args.rate, "status": args.status}
    if args.fault == "shrink":
        return {"cmd": "fault", "action": "shrink", "table": args.table, "size": args.size}
    return {"cmd": "fault", "action": "clear"}


def sai(args: argparse.Namespace) -> int:
    lab, node = sai_switch(args.node)
    frr = lab.frr(node)
    if args.action == "restart":
        old, new = restart_agent(lab, node)
        result: Any = {"old_pid": old, "new_pid": new}
    else:
        result = ask(frr.workdir, _request(args))
    if args.json:
        print(json.dumps(result, indent=2))
    elif args.action == "trace":
        for line in result:
            print(line)
    elif args.action == "dump":
        _print_dump(result)
    elif args.action == "counters":
        _print_counters(result)
        _print_buffers(result)
    elif args.action == "apply":
        for change in result["changes"] or ["nothing to change"]:
            out.print(change, highlight=False)
    else:
        print(json.dumps(result, indent=2))
    if args.action == "apply" and result["failed"]:
        out.print(f"[red]{len(result['failed'])} object(s) not applied:[/]")
        for key, why in result["failed"].items():
            out.print(f"  {key}: {why}", highlight=False)
        return 1
    return 0


def _print_dump(dump: dict[str, list[dict[str, Any]]]) -> None:
    for kind, objects in dump.items():
        out.print(f"[bold]{kind}[/] ({len(objects)})")
        for obj in objects:
            attrs = " ".join(f"{k.split('_ATTR_')[-1]}={v}" for k, v in obj.items()
                             if k != "id" and v not in (0, None, []))
            out.print(f"  {obj['id']}  {attrs}", highlight=False)


def _print_counters(rows: list[dict[str, Any]]) -> None:
    table = Table(title="SAI port and queue counters")
    for column in ("port", "name", "in octets", "in pkts", "in drop", "out octets", "out pkts",
                   "out drop", "queue 0 (qdisc) pkts/drops"):
        table.add_column(column)
    for r in rows:
        s, q = r["stats"], (r["queues"] or [{}])[0]
        table.add_row(r["port"], r["name"], *(str(s.get(f"SAI_PORT_STAT_{k}", "")) for k in (
            "IF_IN_OCTETS", "IF_IN_UCAST_PKTS", "IF_IN_DISCARDS", "IF_OUT_OCTETS",
            "IF_OUT_UCAST_PKTS", "IF_OUT_DISCARDS")),
            f"{q.get('SAI_QUEUE_STAT_PACKETS', '-')}/{q.get('SAI_QUEUE_STAT_DROPPED_PACKETS', '-')}"
            f" ({q.get('qdisc', 'none')})")
    out.print(table)



def _print_buffers(rows: list[dict[str, Any]]) -> None:
    """The port engine's view (harness/nodes/port): queues and priority groups that saw
    traffic, with their watermarks, ECN marks, PFC frames and drops."""
    served = [r for r in rows if "groups" in r]
    if not served:
        return
    pool = served[0]["pool"]
    table = Table(title=f"buffers (pool {pool['size']} B, peak {pool['watermark']} B, "
                        f"{pool['dropped']} dropped)")
    for column in ("port", "what", "pkts", "drops", "now B", "peak B", "headroom peak B",
                   "ECN marked", "PFC tx/rx"):
        table.add_column(column)
    for r in served:
        s = r["stats"]
        for q in r["queues"]:
            if q["SAI_QUEUE_STAT_PACKETS"] or q["SAI_QUEUE_STAT_DROPPED_PACKETS"]:
                table.add_row(r["name"], f"queue {q['queue']}", *(str(q[f"SAI_QUEUE_STAT_{k}"])
                              for k in ("PACKETS", "DROPPED_PACKETS", "CURR_OCCUPANCY_BYTES",
                                        "WATERMARK_BYTES")), "", str(
                              q["SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS"]), "")
        for g in r["groups"]:
            tx, rx = (s[f"SAI_PORT_STAT_PFC_{g['index']}_{d}_PKTS"] for d in ("TX", "RX"))
            if g["SAI_INGRESS_PRIORITY_GROUP_STAT_PACKETS"] or tx or rx:
                table.add_row(r["name"], f"PG {g['index']}" + (" (pausing)" if g["pausing"]
                                                                else ""),
                              *(str(g[f"SAI_INGRESS_PRIORITY_GROUP_STAT_{k}"]) for k in (
                                  "PACKETS", "DROPPED_PACKETS", "CURR_OCCUPANCY_BYTES",
                                  "WATERMARK_BYTES", "XOFF_ROOM_WATERMARK_BYTES")),
                              "", f"{tx}/{rx}")
    out.print(table)
