"""SRv6 planned: each backbone router's locator and SIDs, and the TE policies compiled to SID
lists. Every problem (an unknown node or SID, a SID outside every locator, two hops with no
link between them) is pinned to its key and line before anything is deployed.

A router's SIDs are its locator plus a 16-bit function, as SRv6 deployments lay them out:
:1 End, :d6 End.DT6, :d4 End.DT4, :d46 End.DT46 (each a lookup in the router's table), :1NNN
End.X over its NNN-th port to another SRv6 router, :4NNN End.DX4 and :6NNN End.DX6 over its
NNN-th port to a neighbour outside the backbone (a campus edge).

A path of node names compiles hop by hop: each node but the last gives its End.X over the
link to the next (so the path is followed link by link, whatever routing prefers), a node
followed by a SID gives its End, and the last gives the decapsulation of the destination's
family: End.DT6 or End.DT4. A SID is taken as it is, so a path may end in an End.DT46 or in
a cross-connect (End.DX6, End.DX4) instead.
"""

from __future__ import annotations

import difflib
from collections import deque
from ipaddress import IPv6Address, IPv6Network, ip_address, ip_interface
from typing import NamedTuple

from harness.core.errors import TopologyError, TopologyProblem
from harness.topology.loader import KeyPath, LoadedTopology
from harness.topology.plan import Interface, PathPlan, PolicyPlan, Sid, Srv6Plan
from harness.topology.schema import Kind, NodeFields, Role, Srv6Policy

END, END_DT6, END_DT4, END_DT46 = 0x0001, 0x00D6, 0x00D4, 0x0D46
END_X, END_DX4, END_DX6 = 0x1000, 0x4000, 0x6000
DECAPSULATES = {4: ("End.DT4", "End.DT46", "End.DX4"), 6: ("End.DT6", "End.DT46", "End.DX6")}
MAX_PORTS = 0xFFF


class Srv6Layout(NamedTuple):
    locators: dict[str, str]
    sids: dict[str, list[Sid]]
    plan: Srv6Plan | None


def is_srv6_router(node: NodeFields) -> bool:
    return node.role is Role.backbone and node.kind is Kind.sai


def sid_at(locator: IPv6Network, function: int) -> IPv6Address:
    return locator.network_address + (function << (112 - locator.prefixlen))


def plan_srv6(loaded: LoadedTopology, nodes: dict[str, NodeFields],
              interfaces: dict[str, list[Interface]]) -> Srv6Layout:
    """The lab's SRv6, or TopologyError listing every problem."""
    spec, src = loaded.spec.srv6, loaded.source
    problems = [src.problem(("topology", "nodes", name, "locator"),
                            "a locator belongs to an SRv6 router (role backbone, kind sai) "
                            "of a lab with an srv6 section",
                            "remove it, or add srv6: {} and make the node one")
                for name, n in nodes.items()
                if n.locator is not None and (spec is None or not is_srv6_router(n))]
    if spec is None:
        if problems:
            raise TopologyError(problems)
        return Srv6Layout({}, {}, None)
    routers = [name for name, n in nodes.items() if is_srv6_router(n)]
    locators = _locators(loaded, nodes, routers, problems)
    sids = {name: _sids(name, locators[name], interfaces, set(routers)) for name in locators}
    compiler = _Compiler(loaded, nodes, interfaces, locators, sids, problems)
    policies = [compiler.policy(i, policy) for i, policy in enumerate(spec.policies)]
    names = [p.name for p in spec.policies]
    problems += [src.problem(("srv6", "policies", i, "name"), f"policy name {name!r} is used "
                             "twice", "give each policy its own name")
                 for i, name in enumerate(names) if name in names[:i]]
    if problems:
        raise TopologyError(problems)
    return Srv6Layout({n: str(loc) for n, loc in locators.items()}, sids, Srv6Plan(
        probe_interval_us=round(spec.probe_interval), probe_misses=spec.probe_misses,
        probe_up=spec.probe_up, hold_down_us=round(spec.hold_down),
        policies=[p for p in policies if p is not None]))


def _locators(loaded: LoadedTopology, nodes: dict[str, NodeFields], routers: list[str],
              problems: list[TopologyProblem]) -> dict[str, IPv6Network]:
    spec, src = loaded.spec.srv6, loaded.source
    assert spec is not None
    given = {name: nodes[name].locator for name in routers if nodes[name].locator is not None}
    taken: list[IPv6Network] = []
    for name, locator in given.items():
        path = ("topology", "nodes", name, "locator")
        clash = next((other for other in taken if other.overlaps(locator)), None)  # type: ignore[arg-type]
        if not 16 <= locator.prefixlen <= 64:  # type: ignore[union-attr]
            problems.append(src.problem(path, f"locator {locator} leaves no room for a "
                                        "16-bit function", "use a /16 to /64"))
        elif clash is not None:
            problems.append(src.problem(path, f"locator {locator} overlaps {clash}",
                                        "give every router its own locator"))
        taken.append(locator)  # type: ignore[arg-type]
    # From the pool's second block on: router n gets fcbb:bbbb:n::/48 from the default pool.
    free = (net for i, net in enumerate(spec.locators.subnets(new_prefix=spec.locator_length))
            if i and not any(net.overlaps(t) for t in taken)) \
        if spec.locator_length > spec.locators.prefixlen else iter(())
    locators: dict[str, IPv6Network] = {}
    for name in routers:
        chosen = given.get(name) or next(free, None)
        if chosen is None:
            problems.append(src.problem(("srv6", "locators"), f"pool {spec.locators} has no "
                                        f"/{spec.locator_length} left for {name}",
                                        "use a shorter pool prefix or a longer locator_length"))
            continue
        locators[name] = chosen
    return locators


def _address(interfaces: dict[str, list[Interface]], node: str, iface: str, version: int
             ) -> str | None:
    found = next((i for i in interfaces[node] if i.name == iface), None)
    text = (found.ipv4 if version == 4 else found.ipv6) if found else None
    return str(ip_interface(text).ip) if text else None


def _sids(name: str, locator: IPv6Network, interfaces: dict[str, list[Interface]],
          routers: set[str]) -> list[Sid]:
    sids = [Sid(sid=str(sid_at(locator, function)), behavior=behavior) for function, behavior in (
        (END, "End"), (END_DT6, "End.DT6"), (END_DT4, "End.DT4"), (END_DT46, "End.DT46"))]
    for number, iface in enumerate(interfaces[name][:MAX_PORTS], 1):
        peer = iface.peer
        v6 = _address(interfaces, peer.node, peer.iface, 6)
        v4 = _address(interfaces, peer.node, peer.iface, 4)
        if v6 is None:
            continue  # a user-configured neighbour: its addresses are its own business
        if peer.node in routers:
            sids.append(Sid(sid=str(sid_at(locator, END_X + number)), behavior="End.X",
                            iface=iface.name, nexthop=v6))
            continue
        if v4 is not None:
            sids.append(Sid(sid=str(sid_at(locator, END_DX4 + number)), behavior="End.DX4",
                            iface=iface.name, nexthop=v4))
        sids.append(Sid(sid=str(sid_at(locator, END_DX6 + number)), behavior="End.DX6",
                        iface=iface.name, nexthop=v6))
    return sids


class _Compiler:
    """Policies' paths to SID lists, problems collected."""

    def __init__(self, loaded: LoadedTopology, nodes: dict[str, NodeFields],
                 interfaces: dict[str, list[Interface]], locators: dict[str, IPv6Network],
                 sids: dict[str, list[Sid]], problems: list[TopologyProblem]) -> None:
        self.src, self.nodes, self.interfaces = loaded.source, nodes, interfaces
        self.locators, self.sids = locators, sids
        self.problems = problems
        self.owner = {s.sid: name for name, listed in sids.items() for s in listed}
        self.by_sid = {s.sid: s for listed in sids.values() for s in listed}

    def problem(self, path: KeyPath, message: str, fix: str) -> None:
        self.problems.append(self.src.problem(path, message, fix))

    def policy(self, i: int, policy: Srv6Policy) -> PolicyPlan | None:
        at: KeyPath = ("srv6", "policies", i)
        if not self._router(policy.headend, (*at, "headend")):
            return None
        path = self._path(policy, policy.path, (*at, "path"))
        fallback = self._path(policy, policy.fallback, (*at, "fallback")) \
            if policy.fallback else None
        if path is None or (policy.fallback and fallback is None):
            return None
        return PolicyPlan(name=policy.name, headend=policy.headend,
                          destination=str(policy.destination), path=path, fallback=fallback)

    def _router(self, name: str, at: KeyPath) -> bool:
        if name in self.locators:
            return True
        if name in self.nodes:
            self.problem(at, f"{name} is not an SRv6 router", "use a node with role backbone "
                         f"and kind sai: {', '.join(self.locators) or 'the lab has none'}")
        else:
            close = difflib.get_close_matches(name, self.nodes, n=1)
            self.problem(at, f"unknown node {name!r}",
                         f"did you mean '{close[0]}'?" if close else "name a node of the lab")
        return False

    def _element(self, text: str, at: KeyPath) -> tuple[str, Sid | None] | None:
        """A path element as (node, its SID if the element is one)."""
        try:
            address = ip_address(text)
        except ValueError:
            return (text, None) if self._router(text, at) else None
        sid = str(address)
        if address.version == 6 and sid in self.owner:
            return self.owner[sid], self.by_sid[sid]
        holder = next((n for n, loc in self.locators.items() if address in loc), None)
        if holder is None:
            self.problem(at, f"SID {text} is outside every locator", "use a SID of a router's "
                         "locator: " + ", ".join(f"{n} {loc}" for n, loc in self.locators.items()))
        else:
            self.problem(at, f"{text} is in {holder}'s locator but is none of its SIDs",
                         "use one of " + ", ".join(f"{s.sid} ({s.behavior}"
                                                   f"{' ' + s.iface if s.iface else ''})"
                                                   for s in self.sids[holder]))
        return None

    def _path(self, policy: Srv6Policy, elements: list[str] | None, at: KeyPath
              ) -> PathPlan | None:
        assert elements is not None
        resolved = [self._element(e, (*at, j)) for j, e in enumerate(elements)]
        if any(r is None for r in resolved):
            return None
        steps: list[tuple[str, Sid | None]] = resolved  # type: ignore[assignment]
        ok = True
        previous = policy.headend
        for j, (node, sid) in enumerate(steps):
            if sid is None and previous and not self._ports(previous, node):
                self.problem((*at, j), f"no link between {previous} and {node}",
                             f"add a link, or name a node linked to {previous} first")
                ok = False
            previous = node if sid is None else ""
        if not ok:
            return None
        segments: list[str] = []
        for j, (node, sid) in enumerate(steps):
            if sid is not None:
                segments.append(sid.sid)
            elif j + 1 < len(steps) and steps[j + 1][1] is None:
                port = self._ports(node, steps[j + 1][0])[0]
                segments.append(next(s.sid for s in self.sids[node]
                                     if s.behavior == "End.X" and s.iface == port))
            elif j + 1 < len(steps):
                segments.append(self._function(node, "End").sid)
            else:
                segments.append(self._function(
                    node, f"End.DT{policy.destination.version}").sid)
        tail_node = steps[-1][0]
        last = self.by_sid[segments[-1]]
        decapsulates = DECAPSULATES[policy.destination.version]
        if last.behavior not in decapsulates:
            self.problem((*at, len(steps) - 1), f"the path ends at {last.sid} "
                         f"({last.behavior}), which does not decapsulate {policy.destination}",
                         f"end it at the tail's {', '.join(decapsulates)} (or its node name)")
            return None
        first = steps[0][0]
        iface = (self._ports(policy.headend, first) or [self._towards(policy.headend, first)])[0]
        if iface is None:
            self.problem((*at, 0), f"{policy.headend} has no way to {first}",
                         "link the headend to the path")
            return None
        probe = [*segments[:-1], self._function(tail_node, "End.DT6").sid]
        return PathPlan(segments=segments, hops=[policy.headend, *(n for n, _ in steps)],
                        iface=iface, probe=probe)

    def _function(self, node: str, behavior: str) -> Sid:
        return next(s for s in self.sids[node] if s.behavior == behavior)

    def _ports(self, a: str, b: str) -> list[str]:
        return [i.name for i in self.interfaces[a] if i.peer.node == b]

    def _towards(self, start: str, goal: str) -> str | None:
        """`start`'s port on a shortest path to `goal` (breadth first over the links)."""
        first_port: dict[str, str | None] = {start: None}
        queue = deque([start])
        while queue:
            node = queue.popleft()
            for iface in self.interfaces[node]:
                peer = iface.peer.node
                if peer not in first_port:
                    first_port[peer] = first_port[node] or iface.name
                    if peer == goal:
                        return first_port[peer]
                    queue.append(peer)
        return None
