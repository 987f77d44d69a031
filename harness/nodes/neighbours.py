"""The neighbours a user's own FRR config declares, and whether each is up.

A containerlab-style lab has no session plan, so convergence means: every BGP neighbour the
config names (an address, or an interface for BGP unnumbered) Established, and an OSPF or
OSPFv3 adjacency Full on every link where both ends run the protocol and neither is passive.
An interface runs OSPF by `ip ospf area` (or `ipv6 ospf6 area`, or ospf6's `interface X area`)
or by a `network P area A` covering one of its addresses, read from the kernel.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from ipaddress import IPv4Interface, IPv6Interface, ip_address, ip_interface, ip_network
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from harness.core.errors import LabError

if TYPE_CHECKING:
    from harness.runtime.context import LabContext

SECTIONS = ("router ", "interface ", "vrf ", "route-map ", "bfd", "line ", "key ",
            "segment-routing", "mpls ", "nexthop-group ", "pbr-map ")
PROTOCOLS = ("bgp", "ospf", "ospf6")


@dataclass(frozen=True)
class Neighbour:
    node: str
    protocol: str  # one of PROTOCOLS
    peer: str  # BGP: the address or interface the config names; OSPF: the local interface

    def __str__(self) -> str:
        return f"{self.node} {self.protocol} {self.peer}"


@dataclass
class FrrConfig:
    """What of a config convergence needs (default VRF only)."""

    bgp: set[str] = field(default_factory=set)
    addresses: dict[str, list[IPv4Interface | IPv6Interface]] = field(default_factory=dict)
    ospf_networks: list[str] = field(default_factory=list)
    ospf_ifaces: set[str] = field(default_factory=set)
    ospf6_ifaces: set[str] = field(default_factory=set)
    passive: dict[str, set[str]] = field(default_factory=lambda: {"ospf": set(),
                                                                   "ospf6": set()})
    passive_default: bool = False

    def bgp_over(self, cabled: set[str]) -> set[str]:
        """BGP neighbours, less those on an interface the lab does not cable (a link left
        out by --node-filter): an unnumbered one named by it, or an address in its subnet."""
        def reachable(peer: str) -> bool:
            if not peer[0].isdigit() and ":" not in peer:
                return peer in cabled
            address = ip_address(peer)
            return not any(address in a.network for iface, found in self.addresses.items()
                           if iface not in cabled for a in found)
        return {peer for peer in self.bgp if reachable(peer)}

    def runs(self, protocol: str, iface: str, addresses: list[IPv4Interface]) -> bool:
        """Does `iface` (with these IPv4 addresses) form adjacencies of `protocol`?"""
        if iface in self.passive[protocol]:
            return False
        if protocol == "ospf6":
            return iface in self.ospf6_ifaces
        if self.passive_default:
            return False
        return iface in self.ospf_ifaces or any(
            a.ip in ip_network(n, strict=False) for n in self.ospf_networks for a in addresses)


def parse(config: str) -> FrrConfig:
    out = FrrConfig()
    groups, members, shut = set(), set(), set()
    section = ""
    for raw in config.splitlines():
        line = raw.strip()
        if not raw.startswith((" ", "\t")) and line in ("!", "exit", "end"):
            section = ""
            continue
        words = line.split()
        in_ospf6 = section.strip() == "router ospf6" and words[:1] == ["interface"] and \
            "area" in words  # ospf6's own `interface X area A`, not a new section
        if line.startswith(SECTIONS) and not in_ospf6 and (
                not raw.startswith((" ", "\t")) or not section):
            section = line
            continue
        if section.startswith("router bgp") and " vrf " not in section and \
                words[:1] == ["neighbor"] and len(words) >= 3:
            peer, verb = words[1], words[2]
            if verb == "peer-group" and len(words) == 3:
                groups.add(peer)
            elif verb in ("remote-as", "interface") or (verb == "peer-group"):
                members.add(peer)
            elif verb == "shutdown":
                shut.add(peer)
        elif section.strip() == "router ospf":
            if words[:1] == ["network"] and "area" in words:
                out.ospf_networks.append(words[1])
            elif words[:2] == ["passive-interface", "default"]:
                out.passive_default = True
            elif words[:1] == ["passive-interface"] and len(words) == 2:
                out.passive["ospf"].add(words[1])
        elif section.strip() == "router ospf6" and words[:1] == ["interface"] and \
                "area" in words:
            out.ospf6_ifaces.add(words[1])
        elif section.startswith("interface "):
            iface = section.split()[1]
            if words[:2] in (["ip", "address"], ["ipv6", "address"]) and len(words) > 2:
                out.addresses.setdefault(iface, []).append(ip_interface(words[2]))
            elif words[:3] == ["ip", "ospf", "area"]:
                out.ospf_ifaces.add(iface)
            elif words[:3] == ["ipv6", "ospf6", "area"]:
                out.ospf6_ifaces.add(iface)
            elif words[:3] == ["ip", "ospf", "passive"]:
                out.passive["ospf"].add(iface)
            elif words[:3] == ["ipv6", "ospf6", "passive"]:
                out.passive["ospf6"].add(iface)
    out.bgp = members - groups - shut
    return out


def is_up(neighbour: Neighbour, answers: dict[str, Any]) -> bool:
    """`answers`: the node's `show bgp neighbors`, `show ip ospf neighbor` and `show ipv6
    ospf6 neighbor` in JSON, keyed by protocol."""
    if neighbour.protocol == "bgp":
        return answers["bgp"].get(neighbour.peer, {}).get("bgpState") == "Established"
    if neighbour.protocol == "ospf":
        return any(entry.get("ifaceName", "").split(":")[0] == neighbour.peer and
                   entry.get("nbrState", "").startswith("Full")
                   for entries in answers["ospf"].get("neighbors", {}).values()
                   for entry in entries)
    return any(entry.get("interfaceName") == neighbour.peer and entry.get("state") == "Full"
               for entry in answers["ospf6"].get("neighbors", []))


def interface_addresses(lab: LabContext, node: str) -> dict[str, list[IPv4Interface]]:
    with lab.node(node).netlink() as ip:
        names = {link["index"]: link.get_attr("IFLA_IFNAME") for link in ip.get_links()}
        found: dict[str, list[IPv4Interface]] = {}
        for addr in ip.get_addr(family=socket.AF_INET):
            found.setdefault(names.get(addr["index"], ""), []).append(
                IPv4Interface(f"{addr.get_attr('IFA_ADDRESS')}/{addr['prefixlen']}"))
        return found


def declared_of(lab: LabContext, name: str) -> list[Neighbour]:
    """The neighbours one user-configured FRR node's config (and its peers') imply: reads
    only its own and its peers' configs, so `inspect` stays linear in the lab."""
    node = lab.plan.node(name)
    peers = {i.peer.node for i in node.interfaces
             if lab.plan.node(i.peer.node).runs_own_frr}
    configs = {n: parse(Path(lab.plan.node(n).frr_config or "/dev/null").read_text())
               for n in {name, *peers}}
    addresses = {n: interface_addresses(lab, n) if configs[n].ospf_networks else {}
                 for n in configs}
    daemons = set(node.daemons or ())
    found = [Neighbour(name, "bgp", p)
             for p in sorted(configs[name].bgp_over({i.name for i in node.interfaces}))
             if "bgpd" in daemons]
    for iface in node.interfaces:
        peer, peer_iface = iface.peer.node, iface.peer.iface
        if peer not in peers:
            continue
        for protocol in ("ospf", "ospf6"):
            daemon = f"{protocol}d"
            if daemon in daemons and daemon in (lab.plan.node(peer).daemons or ()) and \
                    configs[name].runs(protocol, iface.name,
                                       addresses[name].get(iface.name, [])) and \
                    configs[peer].runs(protocol, peer_iface, addresses[peer].get(peer_iface, [])):
                found.append(Neighbour(name, protocol, iface.name))
    return found


def declared(lab: LabContext) -> dict[str, list[Neighbour]]:
    """Every user-configured FRR node -> the neighbours it should have up."""
    return {n.name: declared_of(lab, n.name) for n in lab.plan.nodes if n.runs_own_frr}


class Daemons(Protocol):
    """A node's FRR as far as its neighbour tables go (nodes/frr.py's Frr)."""

    daemons: tuple[str, ...]

    def show_json(self, daemon: str, command: str) -> Any: ...


def answers(frr: Daemons) -> dict[str, Any]:
    """The node's neighbour tables, empty for a daemon that does not run or answer."""
    queries = {"bgp": ("bgpd", "show bgp neighbors"), "ospf": ("ospfd", "show ip ospf neighbor"),
               "ospf6": ("ospf6d", "show ipv6 ospf6 neighbor")}
    found: dict[str, Any] = {}
    for protocol, (daemon, command) in queries.items():
        try:
            found[protocol] = frr.show_json(daemon, command) if daemon in frr.daemons else {}
        except LabError:
            found[protocol] = {}
    return found
