"""Render FRR configuration from a LabPlan (pure: plan in, text out).

A node boots without its BGP neighbours' BFD and gets it once BGP is Established
(`bfd_attachment`): FRR 8.4's bgpd registers a BFD session before it knows the session's
source address and interface, re-registers it with both when BGP comes up, and takes the new
session's initial Down for a failure, resetting every BGP session once (FRRouting/frr#17337,
fixed after 8.4). Registered after BGP is up, the session has its full key from the start.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from harness.topology.plan import LabPlan, NodePlan, Session

if TYPE_CHECKING:
    import jinja2


@cache
def _environment() -> jinja2.Environment:
    """Built, and jinja2 imported, on the first render: commands that only read a lab
    (inspect) start without it."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("harness.topology", "templates"),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True)


def render_frr(plan: LabPlan, node: NodePlan, log_file: str, *,
               bfd_neighbours: bool = True) -> str:
    """The node's frr.conf; `bfd_neighbours=False`: the config it boots with."""
    template = _environment().get_template("frr.conf.j2")
    return template.render(plan=plan, node=node, sessions=plan.sessions_of(node.name),
                           log_file=log_file, bfd_neighbours=bfd_neighbours,
                           bfd_neighbour=lambda s: bfd_neighbour(plan, node, s))


def bfd_neighbour(plan: LabPlan, node: NodePlan, session: Session) -> str:
    """The `router bgp` line that puts a session under BFD, with its profile: echo on a
    host's links when the lab asks for it."""
    assert plan.bfd is not None
    host_link = plan.bfd.host_echo_ms and "host" in (node.role.value,
                                                     plan.node(session.peer).role.value)
    return f"neighbor {session.peer_ip} bfd profile {'host-link' if host_link else 'fabric'}"


def bfd_attachment(plan: LabPlan, node: NodePlan) -> list[str]:
    """vtysh commands that give a booted node its BGP neighbours' BFD (none without BFD)."""
    sessions = plan.sessions_of(node.name)
    if plan.bfd is None or node.user_configured or not sessions:
        return []
    return ["configure terminal", f"router bgp {node.asn}",
            *(bfd_neighbour(plan, node, s) for s in sessions)]
