"""Cross-reference checks the schema cannot express: names, endpoints, pools, addresses.

Every problem is collected (not just the first), each pinned to its key and line.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from ipaddress import IPv4Address, IPv6Address, ip_network

from harness.errors import TopologyError, TopologyProblem
from harness.topology.loader import LoadedTopology
from harness.topology.schema import Kind, NodeSpec

NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")
IFACE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,14}$")


def merged_node(defaults: NodeSpec, kinds: dict[Kind, NodeSpec], node: NodeSpec) -> NodeSpec:
    """containerlab's precedence: topology.defaults < topology.kinds[kind] < the node."""
    kind = node.kind or defaults.kind or Kind.frr
    layers = [defaults, kinds.get(kind, NodeSpec()), node]
    values: dict[str, object] = {}
    for layer in layers:
        values.update(layer.model_dump(exclude_unset=True))
    values["kind"] = kind
    return NodeSpec.model_validate(values)


def split_endpoint(text: str) -> tuple[str, str] | None:
    node, sep, iface = text.partition(":")
    return (node, iface) if sep and node and iface else None


def validate(loaded: LoadedTopology) -> dict[str, NodeSpec]:
    """Return every node with defaults applied, or raise TopologyError listing all problems."""
    spec, src = loaded.spec, loaded.source
    topo = spec.topology
    problems: list[TopologyProblem] = []
    nodes: dict[str, NodeSpec] = {}
    for name, node in topo.nodes.items():
        path = ("topology", "nodes", name)
        if not NODE_NAME.match(name):
            problems.append(src.problem(path, f"node name {name!r} is not usable",
                                        "use up to 32 letters, digits, '-' or '_'"))
        merged = merged_node(topo.defaults, topo.kinds, node)
        if merged.role is None:
            problems.append(src.problem(path, f"node {name!r} has no role",
                                        "add 'role: leaf' (or host, spine, superspine, "
                                        "backbone, scaleup), or set it in topology.defaults"))
        nodes[name] = merged
    problems += _endpoint_problems(loaded, nodes)
    problems += _pool_problems(loaded, len(nodes))
    problems += _loopback_problems(loaded, nodes)
    if problems:
        raise TopologyError(problems)
    return nodes


def _endpoint_problems(loaded: LoadedTopology, nodes: dict[str, NodeSpec]) -> list[TopologyProblem]:
    src, problems = loaded.source, []
    used: dict[tuple[str, str], int] = {}
    for i, link in enumerate(loaded.spec.topology.links):
        ends = []
        for j, text in enumerate(link.endpoints):
            path = ("topology", "links", i, "endpoints", j)
            parsed = split_endpoint(text)
            if parsed is None:
                problems.append(src.problem(path, f"endpoint {text!r} is not 'node:interface'",
                                            "write it like \"leaf1:eth1\""))
                continue
            node, iface = parsed
            if node not in nodes:
                close = difflib.get_close_matches(node, nodes, n=1)
                problems.append(src.problem(
                    path, f"link to unknown node {node!r}",
                    f"did you mean '{close[0]}'?" if close else
                    f"declare {node!r} under topology.nodes"))
            if not IFACE_NAME.match(iface) or iface == "lo":
                problems.append(src.problem(path, f"interface name {iface!r} is not usable",
                                            "use a Linux name of at most 15 characters "
                                            "such as eth1 (not lo)"))
            if (node, iface) in used:
                problems.append(src.problem(
                    path, f"interface {node}:{iface} is used twice "
                    f"(also by links[{used[node, iface]}])",
                    f"give one of the links another interface on {node}"))
            used.setdefault((node, iface), i)
            ends.append(node)
        if len(ends) == 2 and ends[0] == ends[1]:
            problems.append(src.problem(("topology", "links", i),
                                        f"link from {ends[0]!r} to itself",
                                        "connect two different nodes"))
    return problems


def _pool_problems(loaded: LoadedTopology, node_count: int) -> list[TopologyProblem]:
    src, addressing = loaded.source, loaded.spec.addressing
    pools = addressing.model_dump()
    problems = []
    names = list(pools)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            na, nb = ip_network(pools[a]), ip_network(pools[b])
            if na.version == nb.version and na.overlaps(nb):
                problems.append(src.problem(("addressing", b), f"pool {b} ({nb}) overlaps "
                                            f"pool {a} ({na})", "pick disjoint prefixes"))
    links = len(loaded.spec.topology.links)
    need = {"loopback4": node_count, "loopback6": node_count, "p2p4": links * 2, "p2p6": links * 2}
    for name, count in need.items():
        size = ip_network(pools[name]).num_addresses - (1 if name.startswith("loopback") else 0)
        if count > size:
            problems.append(src.problem(("addressing", name), f"pool {name} ({pools[name]}) "
                                        f"has room for {size} addresses but {count} are needed",
                                        "use a shorter prefix"))
    return problems


def _loopback_problems(loaded: LoadedTopology, nodes: dict[str, NodeSpec]) -> list[TopologyProblem]:
    src, problems = loaded.source, []
    for key in ("loopback4", "loopback6"):
        chosen: list[IPv4Address | IPv6Address] = [
            getattr(n, key) for n in nodes.values() if getattr(n, key) is not None]
        for address, count in Counter(chosen).items():
            if count < 2:
                continue
            owners = [name for name, n in nodes.items() if getattr(n, key) == address]
            problems.append(src.problem(("topology", "nodes", owners[1], key),
                                        f"duplicate address {address} (also on {owners[0]})",
                                        "give every node its own loopback, or omit it to "
                                        "have one allocated"))
    return problems
