"""Bytes that crossed a set of links, from the kernel's interface counters.

Each direction of a link is counted once, where it is received: an endpoint's rx bytes are
what its peer sent over the wire (whatever carried it: veth, impairment engine).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from harness.topology.plan import Endpoint, LinkPlan

if TYPE_CHECKING:
    from harness.runtime.context import LabContext


def received_bytes(lab: LabContext, endpoints: Iterable[Endpoint]) -> int:
    total = 0
    for end in endpoints:
        with lab.node(end.node).netlink() as ip:
            [link] = ip.get_links(ifname=end.iface)
        total += link.get_attr("IFLA_STATS64")["rx_bytes"]
    return total


def link_bytes(lab: LabContext, links: Iterable[LinkPlan]) -> int:
    """Both directions of every link in `links`, since the counters started."""
    return received_bytes(lab, (end for link in links for end in (link.a, link.b)))
