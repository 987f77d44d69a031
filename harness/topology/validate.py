"""Cross-reference checks the schema cannot express: names, endpoints, pools, addresses.

Every problem is collected (not just the first), each pinned to its key and line.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from ipaddress import IPv4Address, IPv6Address, ip_network
from pathlib import Path

from harness.core.errors import TopologyError, TopologyProblem
from harness.topology.binds import parse_bind
from harness.topology.loader import KeyPath, LoadedTopology
from harness.topology.merge import layers, merged_node
from harness.topology.platforms import PLATFORMS
from harness.topology.schema import Kind, NodeFields, Role, TopologySpec

NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")
IFACE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,14}$")
# Special endpoints of containerlab that reach outside the lab; a lab here stays inside.
OUTSIDE_ENDPOINTS = ("host", "mgmt-net", "macvlan", "vxlan", "vxlan-stitch", "dummy")


def split_endpoint(text: str) -> tuple[str, str] | None:
    node, sep, iface = text.partition(":")
    return (node, iface) if sep and node and iface else None


def validate(loaded: LoadedTopology) -> dict[str, NodeFields]:
    """Return every node with its layers merged, or raise TopologyError listing all problems."""
    spec, src = loaded.spec, loaded.source
    topo = spec.topology
    problems = _group_problems(loaded)
    if problems:  # merging needs every group to exist
        raise TopologyError(problems)
    nodes: dict[str, NodeFields] = {}
    for name, node in topo.nodes.items():
        path = ("topology", "nodes", name)
        if not NODE_NAME.match(name):
            problems.append(src.problem(path, f"node name {name!r} is not usable",
                                        "use up to 32 letters, digits, '-' or '_'"))
        merged = merged_node(topo, node)
        problems += _kind_problems(loaded, path, merged)
        problems += _setting_problems(loaded, topo, node, path)
        nodes[name] = merged
    problems += _endpoint_problems(loaded, nodes)
    problems += _pool_problems(loaded, len(nodes))
    problems += _loopback_problems(loaded, nodes)
    problems += _platform_problems(loaded, nodes)
    if problems:  # a defaults or group entry is checked once per node: report it once
        raise TopologyError(list({str(p): p for p in problems}.values()))
    return nodes


def _platform_problems(loaded: LoadedTopology,
                       nodes: dict[str, NodeFields]) -> list[TopologyProblem]:
    """A platform is a SAI switch's hardware: a known one, with the ports its links need."""
    src, problems = loaded.source, []
    cabled = Counter(split_endpoint(e)[0] for link in loaded.spec.topology.links
                     for e in link.endpoints if split_endpoint(e))
    for name, node in nodes.items():
        if node.platform is None:
            continue
        path = ("topology", "nodes", name, "platform")
        platform = PLATFORMS.get(node.platform)
        if platform is None:
            close = difflib.get_close_matches(node.platform, PLATFORMS, n=1)
            problems.append(src.problem(path, f"unknown platform {node.platform!r}",
                                        f"did you mean '{close[0]}'?" if close else
                                        f"use one of {', '.join(PLATFORMS)}"))
        elif node.kind is not Kind.sai:
            problems.append(src.problem(path, f"a platform is a SAI switch's hardware; "
                                        f"{name} is kind {node.kind}", "add 'kind: sai'"))
        elif platform.ports is not None and cabled[name] > platform.ports:
            problems.append(src.problem(path, f"{name} has {cabled[name]} links but a "
                                        f"{platform.name} has {platform.ports} ports",
                                        "a platform with more ports, or fewer links"))
    return problems


def _group_problems(loaded: LoadedTopology) -> list[TopologyProblem]:
    """With a `groups` section, a group is a settings layer and must exist; without one it is
    only a label (containerlab's graph uses it that way)."""
    topo, src = loaded.spec.topology, loaded.source
    if not topo.groups:
        return []
    users: list[tuple[KeyPath, str | None]] = [
        (("topology", "defaults", "group"), topo.defaults.group),
        *((("topology", "kinds", str(k.value), "group"), v.group) for k, v in topo.kinds.items()),
        *((("topology", "nodes", n, "group"), v.group) for n, v in topo.nodes.items())]
    problems = []
    for path, group in users:
        if group is not None and group not in topo.groups:
            close = difflib.get_close_matches(group, topo.groups, n=1)
            problems.append(src.problem(path, f"unknown group {group!r}",
                                        f"did you mean '{close[0]}'?" if close else
                                        f"define it under topology.groups ({group}: {{...}})"))
    return problems


def _kind_problems(loaded: LoadedTopology, path: KeyPath,
                   node: NodeFields) -> list[TopologyProblem]:
    """A role makes a fabric node (planned addresses, ASN, generated FRR config); without one
    the node is the user's, configured by its startup-config, binds and exec."""
    src, name = loaded.source, path[-1]
    if node.kind in (Kind.linux, Kind.bridge) and node.role is not None:
        return [src.problem((*path, "role"), f"a kind {node.kind.value} node has no role",
                            "remove 'role', or use kind frr or sai for a fabric node")]
    if node.role is None and (node.kind is Kind.sai or (
            node.kind is Kind.frr and node.startup_config is None)):
        return [src.problem(path, f"node {name!r} has no role",
                            f"add 'role: leaf' (or {', '.join(r.value for r in Role)}), or "
                            "set it in topology.defaults; or give kind frr a "
                            "startup-config of your own")]
    if node.role is not None and node.startup_config is not None:
        return [src.problem((*path, "startup-config"), "a fabric node's config is generated "
                            "from its role", "remove 'role' to use this config as it is")]
    return []


def _setting_problems(loaded: LoadedTopology, topo: TopologySpec, node: NodeFields,
                      path: KeyPath) -> list[TopologyProblem]:
    """Binds whose source is missing and sysctls outside the node's network namespace, each
    at the layer (defaults, kind, group or node) that wrote it."""
    src, base, problems = loaded.source, Path(loaded.source.file).parent, []
    for layer in layers(topo, node):
        where = _layer_path(topo, layer, path)
        for i, bind in enumerate(layer.binds):
            try:
                parse_bind(bind, base)
            except ValueError as exc:
                problems.append(src.problem((*where, "binds", i), str(exc),
                                            "write SRC:DST[:ro] with SRC relative to "
                                            f"{base or '.'} (create SRC first)"))
        for key in layer.sysctls:
            if not key.startswith("net."):
                problems.append(src.problem((*where, "sysctls", key), f"sysctl {key} is the "
                                            "host's, not the node's", "only net.* sysctls "
                                            "belong to a node's network namespace"))
        if layer.startup_config is not None and not (base / layer.startup_config).is_file():
            problems.append(src.problem((*where, "startup-config"),
                                        f"startup-config {base / layer.startup_config} does "
                                        "not exist", "give the path of an frr.conf, relative "
                                        "to the topology file"))
    return problems


def _layer_path(topo: TopologySpec, layer: NodeFields, node_path: KeyPath) -> KeyPath:
    if layer is topo.defaults:
        return ("topology", "defaults")
    for section in ("kinds", "groups"):
        for key, entry in getattr(topo, section).items():
            if entry is layer:
                return ("topology", section, str(getattr(key, "value", key)))
    return node_path


def _endpoint_problems(loaded: LoadedTopology,
                       nodes: dict[str, NodeFields]) -> list[TopologyProblem]:
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
            if node in OUTSIDE_ENDPOINTS and node not in nodes:
                problems.append(src.problem(path, f"endpoint {text!r} leaves the lab "
                                            f"(containerlab's {node!r} link)", "a lab here "
                                            "touches nothing of the host: connect two nodes"))
                continue
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


def _loopback_problems(loaded: LoadedTopology,
                       nodes: dict[str, NodeFields]) -> list[TopologyProblem]:
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
