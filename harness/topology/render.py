"""Render FRR configuration from a LabPlan (pure: plan in, text out).

A fabric node boots with a config of its own and becomes its frr.conf once the lab's BGP is
up (`after_boot`), for two reasons:
- Its BGP neighbours get BFD only then: FRR 8.4's bgpd registers a BFD session before it knows
  the session's source address and interface, re-registers it with both when BGP comes up,
  and takes the new session's initial Down for a failure, resetting every BGP session once
  (FRRouting/frr#17337, fixed after 8.4). Registered after BGP is up, the session has its full
  key from the start.
- zebra gathers route changes for longer before it processes them (`boot_hold_ms`): while a
  lab boots, each destination reaches a multi-plane host one plane's next hop at a time, and
  each change cost zebra a RIB run and a kernel write (a switch's, an FPM message its agent
  programs) where one would do. On a 504-node lab that was most of the deploy's CPU. Once
  converged, FRR's own 10 ms is back, so a failure is handled as FRR handles it.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from harness.topology.plan import LabPlan, NodePlan, Session

if TYPE_CHECKING:
    import jinja2


FRR_HOLD_MS = 10  # zebra's work-queue hold, which `no zebra work-queue` puts back
BOOT_HOLD_MS_PER_NODE = 5
BOOT_HOLD_MS_MAX = 1000


@cache
def _environment() -> jinja2.Environment:
    """Built, and jinja2 imported, on the first render: commands that only read a lab
    (inspect) start without it."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("harness.topology", "templates"),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True)


def render_frr(plan: LabPlan, node: NodePlan, log_file: str, *, boot: bool = False) -> str:
    """The node's frr.conf; `boot`: the config it boots with."""
    template = _environment().get_template("frr.conf.j2")
    return template.render(plan=plan, node=node, sessions=plan.sessions_of(node.name),
                           log_file=log_file, boot=boot, boot_hold_ms=boot_hold_ms(plan),
                           bfd_neighbour=lambda s: bfd_neighbour(plan, node, s))


def boot_hold_ms(plan: LabPlan) -> int | None:
    """zebra's hold while the lab boots (None: FRR's own): a route change waits this long for
    others to be processed with. Routes take longer to reach every node of a bigger lab, so the
    hold grows with its nodes; decided from the topology alone, like the BGP timers."""
    hold = min(BOOT_HOLD_MS_MAX, BOOT_HOLD_MS_PER_NODE * len(plan.nodes))
    return hold if hold > FRR_HOLD_MS else None


def bfd_neighbour(plan: LabPlan, node: NodePlan, session: Session) -> str:
    """The `router bgp` line that puts a session under BFD, with its profile: echo on a
    host's links when the lab asks for it."""
    assert plan.bfd is not None
    host_link = plan.bfd.host_echo_ms and "host" in (node.role.value,
                                                     plan.node(session.peer).role.value)
    return f"neighbor {session.peer_ip} bfd profile {'host-link' if host_link else 'fabric'}"


def bfd_attachment(plan: LabPlan, node: NodePlan) -> list[str]:
    """The `router bgp` lines that put a node's BGP sessions under BFD (none without BFD)."""
    if plan.bfd is None or node.user_configured:
        return []
    return [bfd_neighbour(plan, node, s) for s in plan.sessions_of(node.name)]


def after_boot(plan: LabPlan, node: NodePlan) -> list[str]:
    """vtysh commands that make what a fabric node booted with its frr.conf, once the lab's
    BGP is up: FRR's own route hold back, and its sessions' BFD ([]: it boots with frr.conf)."""
    if node.user_configured or not plan.sessions_of(node.name):
        return []
    hold = ["no zebra work-queue"] if boot_hold_ms(plan) else []
    bfd = bfd_attachment(plan, node)
    if not hold and not bfd:
        return []
    return ["configure terminal", *hold, *([f"router bgp {node.asn}", *bfd] if bfd else [])]
