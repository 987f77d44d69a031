"""Node faults: a crash (every process in the node dies) and a BGP session reset."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from harness.errors import LabError
from harness.faults import filters
from harness.runtime.processes import kill_and_reap, namespace_ids, pids_in_namespaces
from harness.spray.control import spraying_hosts, start_sprayer

if TYPE_CHECKING:
    from harness.lab import Lab

Undo = Callable[[], None]
STALE_SOCKETS = ("*.vty", "zserv.api")
RESET_TIMEOUT_S = 60.0


def node_crash(lab: Lab, node: str, fault_id: int, *, forwarding: bool = False) -> Undo:
    """SIGKILL every process in the node (FRR, agents, applications). A crashed switch also
    stops forwarding, so its dataplane is blackholed too, unless `forwarding` keeps the stale
    kernel FIB working (a control-plane-only crash, which neighbours notice only by BFD)."""
    lab.node(node)  # a clear error for an unknown node
    if not forwarding:  # first: the dataplane must not outlive the daemons by a kill's time
        filters.blackhole(lab, node, fault_id)
    kill_and_reap(pids_in_namespaces(namespace_ids([lab.runtime.netns_path(node)])))

    def restart() -> None:
        if not forwarding:
            filters.remove(lab, node, fault_id)
        frr = lab.frr(node)
        for pattern in STALE_SOCKETS:  # left by the killed daemons; they would look ready
            for stale in frr.run_dir.glob(pattern):
                stale.unlink()
        frr.start(lab.journal)
        if any(h.name == node for h in spraying_hosts(lab.plan)):
            start_sprayer(lab, lab.plan.node(node))
    return restart


def bgp_reset(lab: Lab, node: str, peer: str | None = None) -> Undo:
    """Hard-reset the node's BGP sessions (all, or those to `peer`); undo waits until they are
    Established again, so the next fault starts from a converged lab."""
    sessions = [s for s in lab.plan.sessions_of(node) if peer is None or s.peer == peer]
    if not sessions:
        raise LabError(f"{node} has no BGP session{f' to {peer}' if peer else ''}")
    frr = lab.frr(node)
    frr.vtysh(*(f"clear bgp {s.peer_ip}" for s in sessions))

    def wait_established() -> None:
        deadline = time.monotonic() + RESET_TIMEOUT_S
        while True:
            states = frr.bgp_peer_states()
            down = [s.peer_ip for s in sessions if states.get(s.peer_ip) != "Established"]
            if not down:
                return
            if time.monotonic() > deadline:
                raise LabError(f"{node}: sessions to {', '.join(down)} not Established "
                               f"{RESET_TIMEOUT_S:.0f}s after a reset")
            time.sleep(0.2)
    return wait_established
