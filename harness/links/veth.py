"""A point-to-point link: one veth pair whose ends are born inside the two nodes' namespaces.

Creating the pair from inside node A with its peer placed straight into node B means no
interface ever exists in the host namespace, so a lab cannot disturb (or collide with) the
host's own interfaces, and two labs can use the same names.
"""

from __future__ import annotations

import os

from pyroute2 import IPRoute

from harness.topology.plan import Interface, LinkPlan


def create_veth(link: LinkPlan, ip_a: IPRoute, netns_path_b: str) -> None:
    fd = os.open(netns_path_b, os.O_RDONLY)
    try:
        ip_a.link("add", ifname=link.a.iface, kind="veth", mtu=link.mtu,
                  peer={"ifname": link.b.iface, "net_ns_fd": fd, "mtu": link.mtu})
    finally:
        os.close(fd)


def configure_interface(ip: IPRoute, iface: Interface) -> None:
    index = ip.link_lookup(ifname=iface.name)[0]
    for cidr in (iface.ipv4, iface.ipv6):
        address, prefixlen = cidr.split("/")
        ip.addr("add", index=index, address=address, prefixlen=int(prefixlen))
    ip.link("set", index=index, state="up")
