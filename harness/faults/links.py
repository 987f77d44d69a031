"""Link faults: a cut (both ends lose carrier, as when a fibre is pulled) and impairments."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from harness.core.errors import LabError
from harness.core.wait import none_left, wait_until
from harness.faults.registry import Undo
from harness.faults.targets import LinkRef, resolve_link
from harness.nodes.frr import frr_of
from harness.topology.plan import Endpoint, Impairment

if TYPE_CHECKING:
    from harness.runtime.context import LabContext


def set_state(lab: LabContext, end: Endpoint, state: str) -> None:
    with lab.node(end.node).netlink() as ip:
        ip.link("set", index=ip.link_lookup(ifname=end.iface)[0], state=state)


def link_down(lab: LabContext, ref: LinkRef, undo: Undo) -> None:
    link, _ = resolve_link(lab.plan, ref)
    for end in (link.a, link.b):
        undo.ends_down.append(end)
        set_state(lab, end, "down")


def flap_bundle(lab: LabContext, node: str, ifaces: Sequence[str], *, times: int,
                period_s: float, down_s: float = 1.0) -> None:
    """`times` times, once per `period_s`: the bundle `ifaces` of `node` down for `down_s`,
    then up until its BGP sessions are back (a trench's worth of fibre failing and
    returning, as route-flap damping is meant for)."""
    peers = {s.peer_ip for s in lab.plan.sessions_of(node) if s.iface in ifaces}
    for _ in range(times):
        start = time.monotonic()
        for iface in ifaces:
            set_state(lab, Endpoint(node=node, iface=iface), "down")
        time.sleep(down_s)
        for iface in ifaces:
            set_state(lab, Endpoint(node=node, iface=iface), "up")
        wait_until(lambda: [p for p, state in frr_of(lab, node).bgp_peer_states().items()
                            if p in peers and state != "Established"], period_s * 2,
                   lambda left: LabError(f"{node}: sessions not back after a flap: {left}"),
                   until=none_left)
        time.sleep(max(0.0, period_s - (time.monotonic() - start)))


def impair(lab: LabContext, ref: LinkRef, impairment: Impairment, undo: Undo) -> None:
    """Impair the named end(s) through the link-impairment layer (netem or its fallback)."""
    from harness.links.impair import apply  # the impairment layer is optional here

    for end in resolve_link(lab.plan, ref)[1]:
        undo.impaired.append(end)
        apply(lab, end, impairment)


def unimpair(lab: LabContext, end: Endpoint) -> None:
    from harness.links.impair import clear

    clear(lab, end)
