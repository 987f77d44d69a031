"""Name what to break the way people say it: 'leaf1:eth1' (one end), 'leaf1--spine1' (a link)."""

from __future__ import annotations

from fnmatch import fnmatchcase

from harness.core.errors import LabError
from harness.topology.plan import Endpoint, LabPlan, LinkPlan

LinkRef = str | Endpoint | LinkPlan


def resolve_link(plan: LabPlan, ref: LinkRef) -> tuple[LinkPlan, list[Endpoint]]:
    """The link `ref` names and the ends it names: one for 'node:iface', both for 'a--b'."""
    if isinstance(ref, LinkPlan):
        return ref, [ref.a, ref.b]
    if isinstance(ref, Endpoint):
        ref = str(ref)
    if "--" in ref:
        left, _, right = ref.partition("--")
        for link in plan.links:
            names = {str(link.a), str(link.b)}
            nodes = {link.a.node, link.b.node}
            if {left, right} in (names, nodes):
                return link, [link.a, link.b]
    elif ":" in ref:
        node, _, iface = ref.partition(":")
        end = Endpoint(node=node, iface=iface)
        if end in plan.link_ends:
            return plan.link_at(end), [end]
    raise LabError(f"lab {plan.name} has no link {ref!r}; name one end as 'node:iface' "
                   f"(e.g. {plan.links[0].a}) or a link as 'nodeA--nodeB' "
                   f"(e.g. {plan.links[0].a.node}--{plan.links[0].b.node})" if plan.links else
                   f"lab {plan.name} has no links")


def node_addresses(plan: LabPlan, node: str) -> tuple[list[str], list[str]]:
    """Every IPv4 and IPv6 address a node owns: loopbacks and link addresses."""
    n = plan.node(node)
    v4 = [n.loopback4, *(i.ipv4.split("/")[0] for i in n.interfaces)]
    v6 = [n.loopback6, *(i.ipv6.split("/")[0] for i in n.interfaces)]
    return v4, v6


def select_nodes(plan: LabPlan, spec: str) -> list[str]:
    """Nodes named by a comma-separated list of names and shell patterns ('r1-*,bag1')."""
    chosen: list[str] = []
    for pattern in filter(None, (p.strip() for p in spec.split(","))):
        matched = [n.name for n in plan.nodes if fnmatchcase(n.name, pattern)]
        if not matched:
            raise LabError(f"no node of lab {plan.name} matches {pattern!r}; nodes: "
                           f"{', '.join(n.name for n in plan.nodes[:8])}"
                           f"{', ...' if len(plan.nodes) > 8 else ''}")
        chosen += [name for name in matched if name not in chosen]
    if not chosen:
        raise LabError(f"{spec!r} names no node; give names or patterns, e.g. 'r1-*,bag1'")
    return chosen


def ports_toward(plan: LabPlan, node: str, toward: str) -> list[str]:
    """`node`'s ports to `toward`: one link, or each member of a bundle."""
    found = [i.name for i in plan.node(node).interfaces if i.peer.node == toward]
    if not found:
        raise LabError(f"{node} has no link to {toward}")
    return found


def plane_switches(plan: LabPlan, plane: int) -> list[str]:
    """Every switch of plane `plane`; a clear error naming the planes there are."""
    switches = [n.name for n in plan.nodes if n.plane == plane]
    if not switches:
        planes = sorted({n.plane for n in plan.nodes if n.plane is not None})
        raise LabError(f"lab {plan.name} has no plane {plane}; planes: {planes or 'none'}")
    return switches
