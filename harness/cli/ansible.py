"""ansible-inventory: a running lab as an ansible inventory, grouped by role, plane, region,
building and kind, every node reached through the `fabric_lab` connection (ansible/
connection_plugins), which runs tasks inside the node on any runtime. Host variables carry what
the playbooks in ansible/ need: the node's vtysh, ASN, loopbacks, BGP neighbours and the
route-map its sessions send through."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from harness.cli.console import make_console
from harness.cli.labref import add_lab_arguments, open_lab
from harness.deploy.lab import Lab
from harness.topology.loader import dump_yaml
from harness.topology.schema import Role

out = make_console()
INVENTORY_FILE = "ansible-inventory.yml"
OUT_ROUTE_MAP = {Role.host: "EXPORT-LOCAL", Role.bag: "LINK-BANDWIDTH"}  # frr.conf.j2's


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("ansible-inventory", help="an ansible inventory of a running lab "
                            "(groups by role, plane, region; runs on any runtime)")
    add_lab_arguments(p, "the lab (default: the only lab)")
    p.add_argument("-o", "--output", help=f"where to write it (default: the lab dir's "
                   f"{INVENTORY_FILE}; '-' for standard output)")
    p.set_defaults(run=write)


def host_vars(lab: Lab, name: str) -> dict[str, Any]:
    node = lab.plan.node(name)
    found: dict[str, Any] = {"ansible_host": name, "role": node.role.value,
                             "kind": node.kind.value}
    for key in ("plane", "region", "building", "asn", "loopback4", "loopback6"):
        if getattr(node, key, None) is not None:
            found[key] = getattr(node, key)
    if node.runs_frr:
        found["vtysh"] = shlex.join(lab.frr(name).vtysh_argv())
        found["bgp_neighbors"] = [s.peer_ip for s in lab.plan.sessions_of(name)]
        found["bgp_out_route_map"] = OUT_ROUTE_MAP.get(node.role)
    return found


def inventory(lab: Lab) -> dict[str, Any]:
    groups: dict[str, list[str]] = {}
    for node in lab.plan.nodes:
        keys = [f"role_{node.role.value}", f"kind_{node.kind.value}"]
        keys += [f"{k}_{v}" for k in ("plane", "region", "building")
                 if (v := getattr(node, k, None)) is not None]
        keys += ["switches"] if node.role is not Role.host else []
        for key in keys:
            groups.setdefault(key.replace("-", "_"), []).append(node.name)
    return {"all": {
        "vars": {"ansible_connection": "fabric_lab", "fabric_lab": lab.plan.name,
                 "ansible_python_interpreter": "/usr/bin/python3"},
        "hosts": {n.name: host_vars(lab, n.name) for n in lab.plan.nodes},
        "children": {g: {"hosts": dict.fromkeys(members)}
                     for g, members in sorted(groups.items())}}}


def write(args: argparse.Namespace) -> int:
    lab = open_lab(args.name, args.topology)
    text = (f"# labctl ansible-inventory {lab.plan.name}: run the playbooks in ansible/ with it\n"
            + dump_yaml(inventory(lab)))
    if args.output == "-":
        print(text, end="")
        return 0
    path = Path(args.output) if args.output else lab.dir / INVENTORY_FILE
    path.write_text(text)
    out.print(f"{lab.plan.name}: inventory in {path}", highlight=False)
    return 0
