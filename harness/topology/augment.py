"""Augment a validated topology into a LabPlan: addresses, ASNs and the eBGP session list.

ASNs follow RFC 7938 with 4-byte private numbers above `bgp.asn_base`: the spines of one plane
share an ASN (so a leaf-spine-leaf-spine valley is an AS-path loop and never used), every leaf
and every host has its own, and super-spines share one. A node's own `asn` wins.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from ipaddress import IPv4Address, IPv6Address, ip_network

from harness.errors import TopologyError, TopologyProblem
from harness.links.fibre import one_way_delay_us
from harness.paths import LAB_NAME_RULE, is_lab_name
from harness.topology.loader import LoadedTopology
from harness.topology.plan import (
    BfdPlan,
    Endpoint,
    Impairment,
    Interface,
    LabPlan,
    LinkPlan,
    NodePlan,
    Session,
)
from harness.topology.schema import LinkSpec, NodeSpec, Role
from harness.topology.validate import split_endpoint, validate

DEFAULT_MTU = 1500
_SHARED_ASN_OFFSET = {Role.superspine: 0, Role.spine: 100}
_UNIQUE_ASN_OFFSET = {Role.leaf: 1_000, Role.host: 10_000, Role.backbone: 20_000,
                      Role.scaleup: 30_000}


def asn_plan(nodes: dict[str, NodeSpec], base: int) -> dict[str, int]:
    counters: dict[Role, int] = defaultdict(int)
    plan = {}
    for name, node in nodes.items():
        assert node.role is not None  # validate() guarantees it
        if node.asn is not None:
            plan[name] = node.asn
        elif node.role in _SHARED_ASN_OFFSET:
            plan[name] = base + _SHARED_ASN_OFFSET[node.role] + (node.plane or 0)
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


def loopback_plan(nodes: dict[str, NodeSpec], pool4: str, pool6: str
                  ) -> dict[str, tuple[IPv4Address, IPv6Address]]:
    taken4 = {n.loopback4 for n in nodes.values() if n.loopback4}
    taken6 = {n.loopback6 for n in nodes.values() if n.loopback6}
    free4, free6 = _free_hosts(pool4, taken4), _free_hosts(pool6, taken6)
    return {name: (n.loopback4 or next(free4), n.loopback6 or next(free6))
            for name, n in nodes.items()}


def impairment_of(link: LinkSpec) -> Impairment:
    """`delay` wins over `distance_km`; otherwise the fibre sets the delay."""
    delay = link.delay if link.delay is not None else (
        one_way_delay_us(link.distance_km) if link.distance_km else 0.0)
    return Impairment(delay_us=delay, jitter_us=link.jitter or 0.0, loss_pct=link.loss or 0.0,
                      duplicate_pct=link.duplicate or 0.0, rate_bps=link.rate)


def augment(loaded: LoadedTopology, name: str | None = None) -> LabPlan:
    """`name` overrides the file's lab name (deploy --name), e.g. for two copies side by side."""
    nodes = validate(loaded)
    spec = loaded.spec
    if name is not None and not is_lab_name(name):
        raise TopologyError([TopologyProblem(
            f"lab name {name!r} is not usable", key="--name", file=loaded.source.file,
            fix=f"use {LAB_NAME_RULE}")])
    asns = asn_plan(nodes, spec.bgp.asn_base)
    loopbacks = loopback_plan(nodes, str(spec.addressing.loopback4),
                              str(spec.addressing.loopback6))
    p2p4 = ip_network(spec.addressing.p2p4).subnets(new_prefix=31)
    p2p6 = ip_network(spec.addressing.p2p6).subnets(new_prefix=127)
    interfaces: dict[str, list[Interface]] = defaultdict(list)
    links, sessions = [], []
    for link in spec.topology.links:
        (na, ia), (nb, ib) = (split_endpoint(e) for e in link.endpoints)  # type: ignore[misc]
        a, b = Endpoint(node=na, iface=ia), Endpoint(node=nb, iface=ib)
        net4, net6 = next(p2p4), next(p2p6)
        mtu = link.mtu or DEFAULT_MTU
        links.append(LinkPlan(a=a, b=b, mtu=mtu, distance_km=link.distance_km,
                              impairment=impairment_of(link)))
        ends = ((a, b, net4[0], net4[1], net6[0], net6[1]),
                (b, a, net4[1], net4[0], net6[1], net6[0]))
        for local, peer, v4, peer4, v6, peer6 in ends:
            interfaces[local.node].append(Interface(
                name=local.iface, ipv4=f"{v4}/31", ipv6=f"{v6}/127", mtu=mtu, peer=peer))
            for afi, mine, theirs in (("ipv4", v4, peer4), ("ipv6", v6, peer6)):
                sessions.append(Session(
                    node=local.node, peer=peer.node, afi=afi, local_ip=str(mine),
                    peer_ip=str(theirs), local_asn=asns[local.node], peer_asn=asns[peer.node],
                    iface=local.iface))
    node_plans = [
        NodePlan(name=name, role=n.role, kind=n.kind, asn=asns[name],
                 router_id=str(loopbacks[name][0]), loopback4=str(loopbacks[name][0]),
                 loopback6=str(loopbacks[name][1]), plane=n.plane, image=n.image,
                 group=n.group,
                 labels=n.labels, exec=n.exec, interfaces=interfaces[name])
        for name, n in nodes.items()]
    bfd = spec.bgp.bfd
    return LabPlan(
        name=name or spec.name, source=loaded.source.file, keepalive=spec.bgp.keepalive,
        hold=spec.bgp.hold, nodes=node_plans, links=links, sessions=sessions,
        bfd=BfdPlan(interval_ms=round(bfd.interval / 1000), multiplier=bfd.multiplier,
                    host_echo_ms=round(bfd.host_echo / 1000) if bfd.host_echo else None)
        if bfd else None)
