"""Is the lab converged? Every planned eBGP session Established, every loopback in every FIB,
and on routers configured by the user every neighbour their configs declare up."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.errors import CheckFailed, LabError
from harness.nodes.neighbours import Neighbour, answers, declared, is_up
from harness.runtime.rtnl_route import host_routes
from harness.topology.plan import Session
from harness.topology.reachability import reachable_origins

if TYPE_CHECKING:
    from harness.deploy.context import LabContext


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
            lines.append(f"  session {s.node} -> {s.peer} ({s.afi} {s.peer_ip}) not Established")
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
    return host_routes(lab.runtime.netns_path(node), lab.kind(node).fib_table)


def check(lab: LabContext, pool: ThreadPoolExecutor) -> Convergence:
    plan = lab.plan
    conv = Convergence(sessions_total=len(plan.sessions))

    def node_state(name: str) -> tuple[dict[str, str], set[str]]:
        try:
            states = lab.frr(name).bgp_peer_states()
        except LabError:
            states = {}
        return states, fib_host_routes(lab, name)

    names = [n.name for n in plan.nodes if not n.user_configured]
    results = dict(zip(names, pool.map(node_state, names), strict=True))
    wanted = declared(lab)
    tables = dict(zip(wanted, pool.map(lambda n: answers(lab.frr(n)), wanted), strict=True))
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
        wanted = {f"{loopbacks[o][0]}/32" for o in origins}
        wanted |= {f"{loopbacks[o][1]}/128" for o in origins}
        conv.routes_total += len(wanted)
        missing = sorted(wanted - results[node][1])
        if missing:
            conv.routes_missing[node] = missing
    return conv


def wait_converged(lab: LabContext, timeout: float,
                   on_poll: Callable[[Convergence], None] = lambda c: None) -> Convergence:
    deadline = time.monotonic() + timeout
    with ThreadPoolExecutor(max_workers=8) as pool:
        while True:
            conv = check(lab, pool)
            on_poll(conv)
            if conv.done:
                return conv
            if time.monotonic() > deadline:
                raise CheckFailed(f"lab {lab.plan.name} did not converge within {timeout:.0f}s; "
                               f"still missing:\n{conv.report()}")
            time.sleep(0.3)
