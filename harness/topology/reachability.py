"""Which loopbacks each node's FIB should hold, from a path-vector simulation of the plan.

With RFC 7938 ASNs not every node can reach every loopback: two spines of one plane share an
ASN, so spine1 rejects any path to spine2 (it carries its own ASN). Convergence therefore
waits for exactly the routes eBGP's loop prevention allows, computed here as BGP would: a
route spreads hop by hop, a node refuses a path containing its own ASN, keeps the shortest,
and hosts re-advertise nothing but their own prefixes.
"""

from __future__ import annotations

from collections import defaultdict

from harness.topology.plan import LabPlan
from harness.topology.schema import Role


def neighbours(plan: LabPlan) -> dict[str, list[str]]:
    peers: dict[str, set[str]] = defaultdict(set)
    for s in plan.sessions:
        peers[s.node].add(s.peer)
    return {node: sorted(p) for node, p in peers.items()}


def reachable_origins(plan: LabPlan) -> dict[str, set[str]]:
    """node -> the other nodes whose loopbacks it should learn."""
    asn = {n.name: n.asn for n in plan.nodes}
    transit = {n.name for n in plan.nodes if n.role is not Role.host}
    peers = neighbours(plan)
    learned: dict[str, set[str]] = {n.name: set() for n in plan.nodes}
    for origin in asn:
        best = {origin: (asn[origin],)}
        frontier = [origin]
        while frontier:
            nxt = []
            for u in frontier:
                if u != origin and u not in transit:
                    continue
                for v in peers.get(u, ()):
                    if v not in best and asn[v] not in best[u]:
                        best[v] = (*best[u], asn[v])
                        nxt.append(v)
            frontier = nxt
        for node in best:
            if node != origin:
                learned[node].add(origin)
    return learned
