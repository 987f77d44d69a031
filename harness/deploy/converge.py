"""Is the lab converged? Every planned eBGP session Established, every loopback in every FIB,
and on routers configured by the user every neighbour their configs declare up."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.core.errors import CheckFailed, LabError
from harness.core.wait import none_left, wait_until
from harness.linux.rtnl_route import host_routes
from harness.nodes.frr import frr_of
from harness.nodes.kind import kind_of
from harness.nodes.neighbours import Neighbour, answers, declared, is_up
from harness.topology.plan import Session
from harness.topology.reachability import reachable_origins
from harness.topology.render import bfd_attachment

if TYPE_CHECKING:
    from harness.runtime.context import LabContext


@dataclass
class Convergence:
    sessions_total: int
    sessions_down: list[Session] = field(default_factory=list)
    routes_total: int = 0
    routes_missing: dict[str, list[str]] = field(default_factory=dict)
    neighbours_total: int = 0
    neighbours_down: list[Neighbour] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return not self.sessions_down and not self.routes_missing and not self.neighbours_down

    def nodes_short(self) -> set[str]:
        """Nodes with a session not Established or a loopback missing from their FIB."""
        return {s.node for s in self.sessions_down} | self.routes_missing.keys()

    @property
    def neighbours_up(self) -> int:
        return self.neighbours_total - len(self.neighbours_down)

    @property
    def sessions_up(self) -> int:
        return self.sessions_total - len(self.sessions_down)

    @property
    def routes_present(self) -> int:
        return self.routes_total - sum(len(v) for v in self.routes_missing.values())

    def report(self) -> str:
        lines = []
        for s in self.sessions_down:
            lines.append(f"  session {s.node} -> {s.peer} ({s.peer_ip}) not Established")
        for node, prefixes in sorted(self.routes_missing.items()):
            lines.append(f"  {node} FIB lacks {len(prefixes)} loopback(s): {', '.join(prefixes)}")
        lines += [f"  {n.node}: {n.protocol} neighbour {n.peer} not up (declared in its config)"
                  for n in self.neighbours_down]
        return "\n".join(lines)

    def summary(self) -> str:
        parts = []
        if self.sessions_total:
            parts.append(f"{self.sessions_total} eBGP sessions Established, "
                         f"{self.routes_total} loopback routes in place")
        if self.neighbours_total:
            parts.append(f"{self.neighbours_total} neighbours the configs declare up")
        return "; ".join(parts) or "nothing to wait for (no routing configured)"


def fib_host_routes(lab: LabContext, node: str) -> set[str]:
    """Destinations of /32 and /128 routes in the table that forwards (main, or SAI's)."""
    return host_routes(lab.runtime.netns_path(node), kind_of(lab, node).fib_table)


NodeState = tuple[dict[str, str], set[str]]  # BGP peer -> FSM state, FIB host routes


class Poll:
    """Every node's BGP sessions and FIB, re-read only where the last read found the node
    short: one read is a bgpd JSON dump and a FIB dump per node (~25k routes on fpf-64),
    and re-reading the converged part of a big lab every round starves the part that is
    still converging. Only a full read can say the lab is converged."""

    def __init__(self, lab: LabContext, pool: ThreadPoolExecutor) -> None:
        self.lab, self.pool = lab, pool
        self.names = [n.name for n in lab.plan.nodes if not n.user_configured]
        self.results: dict[str, NodeState] = {}

    def _node_state(self, name: str) -> NodeState:
        try:
            states = frr_of(self.lab, name).bgp_peer_states()
        except LabError:
            states = {}
        return states, fib_host_routes(self.lab, name)

    def read(self, names: list[str] | None = None) -> Convergence:
        """Re-read `names` (None: every node) and judge the lab on what was last read."""
        names = self.names if names is None else names
        self.results.update(zip(names, self.pool.map(self._node_state, names), strict=True))
        return self.judge()

    def judge(self) -> Convergence:
        lab, plan, results = self.lab, self.lab.plan, self.results
        conv = Convergence(sessions_total=len(plan.sessions))
        wanted = declared(lab)
        tables = dict(zip(wanted, self.pool.map(lambda n: answers(frr_of(lab, n)), wanted),
                          strict=True))
        for node, neighbours in wanted.items():
            conv.neighbours_total += len(neighbours)
            conv.neighbours_down += [n for n in neighbours if not is_up(n, tables[node])]
        for s in plan.sessions:
            if results[s.node][0].get(s.peer_ip) != "Established":
                conv.sessions_down.append(s)
        loopbacks = plan.loopbacks()
        for node, origins in reachable_origins(plan).items():
            if node not in results:  # a user's node: its neighbours are checked instead
                continue
            routes = {f"{loopbacks[o][0]}/32" for o in origins}
            routes |= {f"{loopbacks[o][1]}/128" for o in origins}
            conv.routes_total += len(routes)
            missing = sorted(routes - results[node][1])
            if missing:
                conv.routes_missing[node] = missing
        return conv


def wait_converged(lab: LabContext, timeout: float,
                   on_poll: Callable[[Convergence], None] = lambda c: None) -> Convergence:
    """Converged on a full read; in between, only the nodes the last read found short are
    read again (Poll says why)."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        poll = Poll(lab, pool)
        last: list[Convergence] = []

        def read() -> tuple[Convergence, bool]:
            # the nodes found short; once none is, all of them, to confirm
            full = not last or last[-1].done
            conv = poll.read(None if full else sorted(last[-1].nodes_short()))
            last.append(conv)
            on_poll(conv)
            return conv, full

        return wait_until(read, timeout, lambda _: CheckFailed(
            f"lab {lab.plan.name} did not converge within {timeout:.0f}s; still missing:\n"
            f"{last[-1].report()}"), every=0.3, until=lambda read: read[0].done and read[1])[0]


def wait_bfd_up(lab: LabContext, timeout: float) -> None:
    """Every planned BGP session's BFD session Up, as each node's bfdd reports it."""
    sessions = {n.name: len(lab.plan.sessions_of(n.name)) for n in lab.plan.nodes
                if bfd_attachment(lab.plan, n)}

    def up(name: str) -> bool:
        try:
            peers = frr_of(lab, name).show_json("bfdd", "show bfd peers", enable=True)
        except (LabError, OSError):
            return False
        return sum(1 for p in peers if p.get("status") == "up") >= sessions[name]

    with ThreadPoolExecutor(max_workers=8) as pool:
        def not_up() -> list[str]:
            names = list(sessions)
            down = [n for n, ok in zip(names, pool.map(up, names), strict=True) if not ok]
            for name in set(names) - set(down):
                del sessions[name]  # an Up session is not asked again
            return down

        wait_until(not_up, timeout, lambda down: CheckFailed(
            f"lab {lab.plan.name}: BFD not up within {timeout:.0f}s on "
            f"{', '.join(sorted(down or []))}"), until=none_left)
