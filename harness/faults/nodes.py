"""Node faults: a crash (every process in the node dies) and a BGP session reset."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.core.errors import LabError
from harness.core.wait import none_left, wait_until
from harness.faults import filters
from harness.faults.registry import Undo
from harness.links import impair
from harness.linux.processes import kill_and_reap
from harness.nodes.frr import frr_of
from harness.nodes.kind import kind_of

if TYPE_CHECKING:
    from harness.runtime.context import LabContext

RESET_TIMEOUT_S = 60.0


def node_crash(lab: LabContext, node: str, fault_id: int, undo: Undo, *,
               forwarding: bool = False) -> None:
    """SIGKILL every process in the node (FRR, agents, applications). A crashed switch also
    stops forwarding, so its dataplane is blackholed too, unless `forwarding` keeps the stale
    kernel FIB working (a control-plane-only crash, which neighbours notice only by BFD)."""
    kind_of(lab, node)  # a clear error for an unknown node
    if not forwarding:  # first: the dataplane must not outlive the daemons by a kill's time
        undo.filters.append(node)
        filters.blackhole(lab, node, fault_id)
    undo.restart = node
    kill_and_reap(lab.runtime.node_processes(node))


def restart(lab: LabContext, node: str) -> None:
    """The node's kind brings back all it runs (a switch: FRR with FPM, and its agent), once
    its links' impairment engines, which died with it, carry packets again."""
    impair.revive(lab, node)
    kind_of(lab, node).restart(lab, lab.plan.node(node))


def bgp_reset(lab: LabContext, node: str, peer: str | None, undo: Undo) -> None:
    """Hard-reset the node's BGP sessions (all, or those to `peer`); undoing it waits until
    they are Established again, so the next fault starts from a converged lab."""
    sessions = [s for s in lab.plan.sessions_of(node) if peer is None or s.peer == peer]
    if not sessions:
        raise LabError(f"{node} has no BGP session{f' to {peer}' if peer else ''}")
    undo.sessions[node] = [s.peer_ip for s in sessions]
    frr_of(lab, node).vtysh(*(f"clear bgp {s.peer_ip}" for s in sessions))


def wait_established(lab: LabContext, node: str, peers: list[str]) -> None:
    frr = frr_of(lab, node)

    def down() -> list[str]:
        states = frr.bgp_peer_states()
        return [p for p in peers if states.get(p) != "Established"]

    wait_until(down, RESET_TIMEOUT_S, lambda left: LabError(
        f"{node}: sessions to {', '.join(left)} not Established {RESET_TIMEOUT_S:.0f}s "
        "after a reset"), until=none_left)
