"""The steps faults are made of and undone by, shared by the faults of the catalog and by
restore: a link end's carrier, a crashed node restarted, BGP sessions waited for. Each is
safe to repeat, so a `clear` that failed half-way can run again."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from harness.core.errors import LabError
from harness.core.wait import none_left, wait_until
from harness.links import impair
from harness.nodes.frr import frr_of
from harness.nodes.kind import kind_of
from harness.topology.plan import Endpoint

if TYPE_CHECKING:
    from harness.runtime.context import LabContext

RESET_TIMEOUT_S = 60.0


def set_state(lab: LabContext, end: Endpoint, state: str) -> None:
    with lab.node(end.node).netlink() as ip:
        ip.link("set", index=ip.link_lookup(ifname=end.iface)[0], state=state)


def restart(lab: LabContext, node: str) -> None:
    """The node's kind brings back all it runs (a switch: FRR with FPM, and its agent), once
    its links' impairment engines, which died with it, carry packets again."""
    impair.revive(lab, node)
    kind_of(lab, node).restart(lab, lab.plan.node(node))


def wait_established(lab: LabContext, node: str, peers: list[str]) -> None:
    frr = frr_of(lab, node)

    def down() -> list[str]:
        states = frr.bgp_peer_states()
        return [p for p in peers if states.get(p) != "Established"]

    wait_until(down, RESET_TIMEOUT_S, lambda left: LabError(
        f"{node}: sessions to {', '.join(left or [])} not Established {RESET_TIMEOUT_S:.0f}s "
        "after a reset"), until=none_left)


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
