"""Node faults: a crash (every process in the node dies) and a BGP session reset."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from harness.converge import poll_until
from harness.errors import LabError
from harness.faults import filters
from harness.linux.processes import kill_and_reap
from harness.nodes.frr import frr_of
from harness.nodes.kind import kind_of

if TYPE_CHECKING:
    from harness.runtime.context import LabContext

Undo = Callable[[], None]
RESET_TIMEOUT_S = 60.0


def node_crash(lab: LabContext, node: str, fault_id: int, *, forwarding: bool = False) -> Undo:
    """SIGKILL every process in the node (FRR, agents, applications). A crashed switch also
    stops forwarding, so its dataplane is blackholed too, unless `forwarding` keeps the stale
    kernel FIB working (a control-plane-only crash, which neighbours notice only by BFD)."""
    kind, plan = kind_of(lab, node), lab.plan.node(node)  # a clear error for an unknown node
    if not forwarding:  # first: the dataplane must not outlive the daemons by a kill's time
        filters.blackhole(lab, node, fault_id)
    kill_and_reap(lab.runtime.node_processes(node))

    def restart() -> None:
        """The node's kind brings back all it runs (a switch: FRR with FPM, and its agent)."""
        if not forwarding:
            filters.remove(lab, node, fault_id)
        kind.restart(lab, plan)
    return restart


def bgp_reset(lab: LabContext, node: str, peer: str | None = None) -> Undo:
    """Hard-reset the node's BGP sessions (all, or those to `peer`); undo waits until they are
    Established again, so the next fault starts from a converged lab."""
    sessions = [s for s in lab.plan.sessions_of(node) if peer is None or s.peer == peer]
    if not sessions:
        raise LabError(f"{node} has no BGP session{f' to {peer}' if peer else ''}")
    frr = frr_of(lab, node)
    frr.vtysh(*(f"clear bgp {s.peer_ip}" for s in sessions))

    def down() -> list[str]:
        states = frr.bgp_peer_states()
        return [s.peer_ip for s in sessions if states.get(s.peer_ip) != "Established"]

    def wait_established() -> None:
        poll_until(down, RESET_TIMEOUT_S, lambda left: LabError(
            f"{node}: sessions to {', '.join(left)} not Established {RESET_TIMEOUT_S:.0f}s "
            "after a reset"))
    return wait_established
