"""Point-to-point links: veth pairs whose ends are born inside the two nodes' namespaces.

Creating the pair from inside node A with its peer placed straight into node B means no
interface ever exists in the host namespace, so a lab cannot disturb (or collide with) the
host's own interfaces, and two labs can use the same names. Every end gets a fixed ifindex,
so the whole lab is addressed without a single lookup.
"""

from __future__ import annotations

import os

from harness.linux.rtnl_batch import RtnlBatch
from harness.topology.plan import Endpoint, LabPlan, LinkPlan, NodePlan

FIRST_LINK_IFINDEX = 100  # clear of lo (1) and fallback tunnels (tunl0, sit0...) a netns gets


def ifindexes(node: NodePlan) -> dict[str, int]:
    return {iface.name: FIRST_LINK_IFINDEX + i for i, iface in enumerate(node.interfaces)}


def ifindex_of(plan: LabPlan, end: Endpoint) -> int:
    return ifindexes(plan.node(end.node))[end.iface]


def queue_veth(batch_a: RtnlBatch, plan: LabPlan, link: LinkPlan, netns_path_b: str) -> int:
    """Queue the pair in A's batch; returns the fd of B's namespace (close it after commit)."""
    fd = os.open(netns_path_b, os.O_RDONLY)
    batch_a.add_veth(ifindex_of(plan, link.a), link.a.iface, link.mtu,
                     ifindex_of(plan, link.b), link.b.iface, fd)
    return fd


def queue_addresses(batch: RtnlBatch, node: NodePlan) -> None:
    indexes = ifindexes(node)
    for iface in node.interfaces:
        batch.set_up(indexes[iface.name])
        for cidr in (iface.ipv4, iface.ipv6):
            if cidr is not None:  # else the user's config or exec addresses it
                batch.add_address(indexes[iface.name], cidr)
