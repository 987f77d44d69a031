"""containerlab's `kind: bridge`: the links that end on the node join one Linux bridge.

containerlab expects that bridge to exist in the host; here it lives in the bridge node's own
namespace, so a lab never adds a bridge to the host and two labs can use the same name.
"""

from __future__ import annotations

from harness.runtime.node import Node

BRIDGE_NAME_MAX = 15  # IFNAMSIZ - 1


def bridge_name(node: str) -> str:
    return node[:BRIDGE_NAME_MAX]


def join_bridge(node: Node) -> None:
    with node.netlink() as ip:
        name = bridge_name(node.name)
        ip.link("add", ifname=name, kind="bridge")
        bridge = ip.link_lookup(ifname=name)[0]
        for iface in node.plan.interfaces:
            port = ip.link_lookup(ifname=iface.name)[0]
            ip.link("set", index=port, master=bridge, state="up")
        ip.link("set", index=bridge, state="up")
