"""Augment a validated topology into a LabPlan: addresses, ASNs and the eBGP session list.

ASNs follow RFC 7938 with 4-byte private numbers above `bgp.asn_base`: the spines of one plane
share an ASN (so a leaf-spine-leaf-spine valley is an AS-path loop and never used), every leaf
and every host has its own, and super-spines share one; nodes with a `region` (and
`building`) share them only within it (`asn_scope`), and a region's BAG switches share one.
A node's own `asn` wins.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from ipaddress import IPv4Address, IPv6Address, ip_network
from pathlib import Path

from harness.core.errors import TopologyError, TopologyProblem
from harness.core.paths import LAB_NAME_RULE, is_lab_name
from harness.topology.bgp_timers import bfd_interval_ms, bgp_timers
from harness.topology.binds import parse_bind
from harness.topology.fibre import one_way_delay_us
from harness.topology.loader import LoadedTopology
from harness.topology.plan import (
    BfdPlan,
    Endpoint,
    Impairment,
    Interface,
    LabPlan,
    LinkPlan,
    NodePlan,
    ProbePlan,
    Session,
)
from harness.topology.qos import bypassed_ports, plan_qos
from harness.topology.schema import IGNORED_NODE_KEYS, Kind, LinkSpec, NodeFields, Role
from harness.topology.srv6 import plan_srv6
from harness.topology.user_nodes import user_node
from harness.topology.validate import split_endpoint, validate

DEFAULT_MTU = 1500
# What a node's plan takes from its spec as written: every field the two models share by
# name, so a new node field (region, building, platform) is declared in schema.py and
# plan.py and needs nothing here. The rest is planned: ASNs and loopbacks (fabric nodes
# only), binds resolved against the topology file.
AS_WRITTEN = tuple(f for f in NodePlan.model_fields if f in NodeFields.model_fields
                   and f not in {"asn", "loopback4", "loopback6", "binds", "locator", "kind"})
_SHARED_ASN_OFFSET = {Role.superspine: 0, Role.spine: 100, Role.bag: 200}
_UNIQUE_ASN_OFFSET = {Role.leaf: 1_000, Role.host: 10_000, Role.backbone: 20_000,
                      Role.scaleup: 30_000}
# Shared ASNs of nodes placed in a region (or a building of one) are scoped to it: each scope
# gets its own block, above the unique ranges.
_SCOPED_BASE, _SCOPE_STRIDE = 100_000, 1_000


def asn_scope(node: NodeFields) -> tuple[str | None, ...]:
    """What a shared ASN is shared within: a region's BAG switches, a building's spines (per
    plane) and super-spines. Two buildings' spines with one ASN would each drop the other's
    routes as an AS-path loop, and BAG-BAG sessions across regions would be iBGP."""
    return (node.region,) if node.role is Role.bag else (node.region, node.building)


def asn_plan(nodes: dict[str, NodeFields], base: int) -> dict[str, int]:
    counters: dict[Role, int] = defaultdict(int)
    scopes = sorted({asn_scope(n) for n in nodes.values() if any(asn_scope(n))},
                    key=lambda scope: tuple(part or "" for part in scope))
    plan = {}
    for name, node in nodes.items():
        assert node.role is not None  # validate() guarantees it
        if node.asn is not None:
            plan[name] = node.asn
        elif node.role in _SHARED_ASN_OFFSET:
            scope = asn_scope(node)
            block = _SCOPED_BASE + scopes.index(scope) * _SCOPE_STRIDE if any(scope) else 0
            plan[name] = base + block + _SHARED_ASN_OFFSET[node.role] + (node.plane or 0)
        else:
            counters[node.role] += 1
            plan[name] = base + _UNIQUE_ASN_OFFSET[node.role] + counters[node.role]
    return plan


def _free_hosts(pool: str, taken: set) -> Iterator:
    """Addresses of a loopback pool in order, skipping the network address and taken ones."""
    network = ip_network(pool)
    for i in range(1, network.num_addresses):
        address = network[i]
        if address not in taken:
            yield address


def loopback_plan(nodes: dict[str, NodeFields], pool4: str, pool6: str
                  ) -> dict[str, tuple[IPv4Address, IPv6Address]]:
    taken4 = {n.loopback4 for n in nodes.values() if n.loopback4}
    taken6 = {n.loopback6 for n in nodes.values() if n.loopback6}
    free4, free6 = _free_hosts(pool4, taken4), _free_hosts(pool6, taken6)
    return {name: (n.loopback4 or next(free4), n.loopback6 or next(free6))
            for name, n in nodes.items()}


def waits_for_peer(node: str, peer: str, nodes: dict[str, NodeFields]) -> bool:
    """Whether `node`'s end of a session waits for the peer to open the connection: the upper
    tier waits (between equal roles, the later name). When both ends open at once, FRR 8.4 at
    times drops the session that came up (2-4 of fpf-16's 576 session ends in each of two
    deploys before)."""
    def rank(name: str) -> tuple[int, str]:
        return list(Role).index(nodes[name].role), name  # sessions join fabric nodes: a role
    return rank(node) > rank(peer)


def kind_of_node(node: NodeFields, interfaces: list[Interface],
                 nodes: dict[str, NodeFields]) -> Kind:
    """A host whose NICs reach more than one plane sprays over them: it is a `host`; one
    cabled to a single plane has nothing to spray over and routes as a plain `frr` node."""
    if node.role is Role.host and node.kind in (Kind.frr, Kind.host):
        planes = {nodes[i.peer.node].plane for i in interfaces} - {None}
        return Kind.host if len(planes) > 1 else Kind.frr
    return node.kind


def impairment_of(link: LinkSpec) -> Impairment:
    """`delay` wins over `distance_km`; otherwise the fibre sets the delay."""
    delay = link.delay if link.delay is not None else (
        one_way_delay_us(link.distance_km) if link.distance_km else 0.0)
    return Impairment(delay_us=delay, jitter_us=link.jitter or 0.0, loss_pct=link.loss or 0.0,
                      duplicate_pct=link.duplicate or 0.0, rate_bps=link.rate)


def augment(loaded: LoadedTopology, name: str | None = None,
            node_filter: Sequence[str] | None = None) -> LabPlan:
    """`name` overrides the file's lab name (deploy --name), e.g. for two copies side by side;
    `node_filter` deploys only those nodes and the links between them."""
    nodes = validate(loaded)
    spec, src = loaded.spec, loaded.source
    if name is not None and not is_lab_name(name):
        raise TopologyError([TopologyProblem(
            f"lab name {name!r} is not usable", key="--name", file=src.file,
            fix=f"use {LAB_NAME_RULE}")])
    notes = ignored_keys(loaded)
    if node_filter is not None:
        nodes = _filtered(loaded, nodes, node_filter)
    fabric = {n: spec_ for n, spec_ in nodes.items() if spec_.role is not None}
    asns = asn_plan(fabric, spec.bgp.asn_base)
    loopbacks = loopback_plan(fabric, str(spec.addressing.loopback4),
                              str(spec.addressing.loopback6))
    p2p4 = ip_network(spec.addressing.p2p4).subnets(new_prefix=31)
    p2p6 = ip_network(spec.addressing.p2p6).subnets(new_prefix=127)
    interfaces: dict[str, list[Interface]] = defaultdict(list)
    links, sessions = [], []
    for link in spec.topology.links:
        (na, ia), (nb, ib) = (split_endpoint(e) for e in link.endpoints)  # type: ignore[misc]
        if na not in nodes or nb not in nodes:
            notes.append(f"link {na}:{ia} -- {nb}:{ib} skipped: "
                         f"{na if na not in nodes else nb} is not in --node-filter")
            continue
        a, b = Endpoint(node=na, iface=ia), Endpoint(node=nb, iface=ib)
        mtu = link.mtu or DEFAULT_MTU
        links.append(LinkPlan(a=a, b=b, mtu=mtu, distance_km=link.distance_km,
                              impairment=impairment_of(link)))
        port = {"mtu": mtu, "bandwidth_bps": link.bandwidth}
        if na not in fabric or nb not in fabric:  # the user's own configs address it
            interfaces[na].append(Interface(name=ia, ipv4=None, ipv6=None, peer=b, **port))
            interfaces[nb].append(Interface(name=ib, ipv4=None, ipv6=None, peer=a, **port))
            continue
        net4, net6 = next(p2p4), next(p2p6)
        ends = ((a, b, net4[0], net4[1], net6[0]), (b, a, net4[1], net4[0], net6[1]))
        for local, peer, v4, peer4, v6 in ends:
            interfaces[local.node].append(Interface(
                name=local.iface, ipv4=f"{v4}/31", ipv6=f"{v6}/127", peer=peer, **port))
            sessions.append(Session(
                node=local.node, peer=peer.node, local_ip=str(v4), peer_ip=str(peer4),
                local_asn=asns[local.node], peer_asn=asns[peer.node], iface=local.iface,
                passive=waits_for_peer(local.node, peer.node, nodes)))
    srv6 = plan_srv6(loaded, nodes, interfaces)
    base = Path(src.file).parent
    node_plans = []
    for node_name, n in nodes.items():
        common = {"name": node_name, **{f: getattr(n, f) for f in AS_WRITTEN},
                  "kind": kind_of_node(n, interfaces[node_name], nodes),
                  "binds": [parse_bind(b, base) for b in n.binds],
                  "interfaces": interfaces[node_name]}
        if node_name in fabric:
            v4, v6 = loopbacks[node_name]
            node_plans.append(NodePlan(**common, asn=asns[node_name], router_id=str(v4),
                                       loopback4=str(v4), loopback6=str(v6),
                                       locator=srv6.locators.get(node_name),
                                       sids=srv6.sids.get(node_name, [])))
        else:
            node_plans.append(user_node(loaded, node_name, n, NodePlan(**common)))
            skipped = [c for c in n.exec if c not in node_plans[-1].exec]
            notes += [f"{node_name}: exec {c!r} skipped (its FRR is started by fabric-lab, "
                      "with the daemons its daemons file names)" for c in skipped]
    bfd, probes = spec.bgp.bfd, spec.spray.probes
    bfd_ms, bfd_note = bfd_interval_ms(bfd, len(sessions)) if bfd else (None, None)
    keepalive, hold, timers_note = bgp_timers(spec.bgp, len(sessions), bfd_ms)
    notes += [note for note in (timers_note, bfd_note) if note]
    qos = plan_qos(loaded, nodes)
    # with a buffer the port engine queues first and the impairment comes after (the cable)
    if qos is not None and qos.buffer is None and (bypassed := bypassed_ports(links, nodes)):
        notes.append(f"qos: impaired links bypass the queues of {', '.join(bypassed)} (their "
                     "impairment takes the frames before or instead of the port's queues)")
    return LabPlan(
        name=name or spec.name, source=str(Path(src.file).absolute()),
        keepalive=keepalive, hold=hold, nodes=node_plans, links=links,
        sessions=sessions, notes=notes,
        damping=spec.bgp.damping, srv6=srv6.plan, qos=qos,
        bfd=BfdPlan(interval_ms=bfd_ms, multiplier=bfd.multiplier,
                    host_echo_ms=round(bfd.host_echo / 1000) if bfd.host_echo else None,
                    offload=bfd.offload)
        if bfd else None,
        probes=ProbePlan(interval_us=round(probes.interval), misses=probes.misses,
                         window_us=round(probes.window), drain_pct=probes.drain_loss,
                         budget_pps=probes.budget_pps)
        if probes else None)


def _filtered(loaded: LoadedTopology, nodes: dict[str, NodeFields],
              node_filter: Sequence[str]) -> dict[str, NodeFields]:
    unknown = [n for n in node_filter if n not in nodes]
    if unknown:
        raise TopologyError([TopologyProblem(
            f"--node-filter names {', '.join(unknown)}, not in the topology",
            key="--node-filter", file=loaded.source.file,
            fix=f"pick from: {', '.join(nodes)}")])
    return {n: spec for n, spec in nodes.items() if n in node_filter}


def ignored_keys(loaded: LoadedTopology) -> list[str]:
    """One line per containerlab key that means nothing here, with the nodes that set it."""
    topo = loaded.spec.topology
    entries = {"defaults": topo.defaults, **{f"kinds.{k.value}": v for k, v in
                                             topo.kinds.items()},
               **{f"groups.{k}": v for k, v in topo.groups.items()}, **topo.nodes}
    users: dict[str, list[str]] = defaultdict(list)
    for where, entry in entries.items():
        for field in entry.model_fields_set:
            alias = field.replace("_", "-")
            if alias in IGNORED_NODE_KEYS:
                users[alias].append(where)
    notes = [f"{key} ignored ({IGNORED_NODE_KEYS[key]}): set on {', '.join(where)}"
             for key, where in users.items()]
    if loaded.spec.mgmt is not None:
        notes.append("mgmt ignored (no management network: nodes are reached with "
                     "`labctl exec`)")
    if loaded.spec.prefix is not None:
        notes.append("prefix ignored (nodes are named by the lab: `labctl exec NODE`)")
    macs = [f"links[{path[2]}]" for path in loaded.source.lines
            if path[:2] == ("topology", "links") and path[-1:] == ("mac",)]
    if macs:
        notes.append(f"endpoint mac ignored (the kernel picks each veth's MAC): {', '.join(macs)}")
    if any(link.vars for link in topo.links):
        notes.append("links' vars ignored (no config templating)")
    return notes
