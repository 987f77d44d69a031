"""A chain of five scratch namespaces with SAI switches in the middle three, for the SRv6
dataplane's e2e test and its bench; every route sits in the SAI table, as a lab's do.

    ha --a-- r1 --b/a-- r2 --b/a-- r3 --b-- hb

r1 encapsulates towards hb: H.Encaps for fd00:b::/64 (End.X at r2, End.DT6 at r3) and for
10.0.3.0/24 (End.X at r2, End.DT4 at r3), H.Encaps.Red for 10.0.2.0/24 (End at r2, End.DX4
at r3), H.Encaps for fd00:d::/64 and 10.0.4.0/24 (End at r2, End.DT46 at r3); fd00:c::/64,
another of hb's prefixes, is routed plainly along the same links (the baseline). No IPv4
runs between the routers.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from ipaddress import IPv6Address
from pathlib import Path
from typing import Any

from harness.core.build import built
from harness.linux.nsenter import NETNS_RUN_DIR
from harness.linux.scratch import scratch_netns
from harness.nodes.switch.sai import srv6_engine
from harness.nodes.switch.sai.api import SaiSwitch
from harness.nodes.switch.sai.kernel import SAI_TABLE, KernelBackend
from harness.nodes.switch.sai.seg6 import Srv6Setup
from harness.nodes.switch.sai.types import IpPrefix, MySidKey, ObjectType, RouteKey

T = ObjectType
NODES = ("ha", "r1", "r2", "r3", "hb")
# (node, interface, peer node, peer interface, addresses on this end, on the far end)
LINKS = [("ha", "a", "r1", "a", ["fd00:a::2/64", "10.0.1.2/24"], ["fd00:a::1/64", "10.0.1.1/24"]),
         ("r1", "b", "r2", "a", ["fd00:12::1/64"], ["fd00:12::2/64"]),
         ("r2", "b", "r3", "a", ["fd00:23::1/64"], ["fd00:23::2/64"]),
         ("r3", "b", "hb", "a", ["fd00:b::1/64", "fd00:c::1/64", "fd00:d::1/64", "10.0.2.1/24",
                                 "10.0.3.1/24", "10.0.4.1/24"],
          ["fd00:b::2/64", "fd00:c::2/64", "fd00:d::2/64", "10.0.2.2/24", "10.0.3.2/24",
           "10.0.4.2/24"])]
LOOPBACK = {"r1": "fd00:ff::1", "r2": "fd00:ff::2", "r3": "fd00:ff::3"}
ROUTES = {  # in the SAI table, like every route of a lab's switch, connected ones included
    "r1": ["fcbb:bbbb:2::/48 via fd00:12::2", "fcbb:bbbb:3::/48 via fd00:12::2",
           "fd00:b::/64 via fd00:12::2", "fd00:c::/64 via fd00:12::2",
           "fd00:23::/64 via fd00:12::2", "fd00:a::/64 dev a", "fd00:12::/64 dev b",
           "10.0.1.0/24 dev a"],
    "r2": ["fcbb:bbbb:3::/48 via fd00:23::2", "fd00:b::/64 via fd00:23::2",
           "fd00:c::/64 via fd00:23::2", "fd00:a::/64 via fd00:12::1", "fd00:12::/64 dev a",
           "fd00:23::/64 dev b"],
    "r3": ["fd00:a::/64 via fd00:23::1", "fd00:12::/64 via fd00:23::1", "fd00:23::/64 dev a",
           "fd00:b::/64 dev b", "fd00:c::/64 dev b", "fd00:d::/64 dev b", "10.0.2.0/24 dev b",
           "10.0.3.0/24 dev b", "10.0.4.0/24 dev b"]}
TO_R3_V6 = ["fcbb:bbbb:2::e", "fcbb:bbbb:3::d6"]  # End.X at r2, End.DT6 at r3
TO_R3_V4 = ["fcbb:bbbb:2::1", "fcbb:bbbb:3::4002"]  # End at r2, End.DX4 at r3
TO_R3_DT4 = ["fcbb:bbbb:2::e", "fcbb:bbbb:3::d4"]  # End.X at r2, End.DT4 at r3
TO_R3_DT46 = ["fcbb:bbbb:2::1", "fcbb:bbbb:3::d46"]  # End at r2, End.DT46 at r3


def sh(ns: str, *argv: str, check: bool = True) -> str:
    """argv in namespace `ns`; its output."""
    return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True,
                          check=check).stdout


class Switch:
    """A SAI switch over one namespace's kernel, with a port and router interface per link."""

    def __init__(self, ns: str, directory: Path, program: str, path: str,
                 warm: bool = False) -> None:
        """`warm`: a restarted switch, which reads back what the first left (warm_adopt)."""
        directory.mkdir(exist_ok=True)
        self.backend = KernelBackend(f"{NETNS_RUN_DIR}/{ns}",
                                     srv6=Srv6Setup(directory, program, path))
        self.sai = SaiSwitch(self.backend, attrs={"SAI_SWITCH_ATTR_INIT_SWITCH": True,
                                                  "SAI_SWITCH_ATTR_RESTART_WARM": warm})
        self.rif: dict[str, int] = {}
        for iface in ("a", "b"):
            lane = int(sh(ns, "cat", f"/sys/class/net/{iface}/ifindex"))
            _, port = self.sai.create(T.PORT, {"SAI_PORT_ATTR_HW_LANE_LIST": [lane]})
            _, self.rif[iface] = self.sai.create(T.ROUTER_INTERFACE, {  # type: ignore[assignment]
                "SAI_ROUTER_INTERFACE_ATTR_VIRTUAL_ROUTER_ID": self.sai.default_vr,
                "SAI_ROUTER_INTERFACE_ATTR_TYPE": "SAI_ROUTER_INTERFACE_TYPE_PORT",
                "SAI_ROUTER_INTERFACE_ATTR_PORT_ID": port})

    def ok(self, kind: ObjectType, attrs: dict[str, Any], key: MySidKey | RouteKey | None = None
           ) -> int:
        status, oid = self.sai.create(kind, attrs, key)
        assert status.ok, (kind, attrs, status)
        return oid  # type: ignore[return-value]

    def hop(self, ip: str, iface: str) -> int:
        return self.ok(T.NEXT_HOP, {"SAI_NEXT_HOP_ATTR_TYPE": "SAI_NEXT_HOP_TYPE_IP",
                                    "SAI_NEXT_HOP_ATTR_IP": ip,
                                    "SAI_NEXT_HOP_ATTR_ROUTER_INTERFACE_ID": self.rif[iface]})

    def policy(self, prefix: str, segments: list[str], kind: str) -> int:
        """H.Encaps(.Red) of `prefix` with `segments`: a SID list, its next hop, the route."""
        sids = self.ok(T.SRV6_SIDLIST, {"SAI_SRV6_SIDLIST_ATTR_TYPE": kind,
                                        "SAI_SRV6_SIDLIST_ATTR_SEGMENT_LIST": segments})
        hop = self.ok(T.NEXT_HOP, {"SAI_NEXT_HOP_ATTR_TYPE": "SAI_NEXT_HOP_TYPE_SRV6_SIDLIST",
                                   "SAI_NEXT_HOP_ATTR_SRV6_SIDLIST_ID": sids,
                                   "SAI_NEXT_HOP_ATTR_ROUTER_INTERFACE_ID": self.rif["b"]})
        self.ok(T.ROUTE_ENTRY, {"SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID": hop},
                RouteKey(self.sai.default_vr, IpPrefix.parse(prefix)))
        return sids

    def sid(self, sid: str, behavior: str, **attrs: int) -> MySidKey:
        key = MySidKey(self.sai.default_vr, IPv6Address(sid))
        self.ok(T.MY_SID_ENTRY, {"SAI_MY_SID_ENTRY_ATTR_ENDPOINT_BEHAVIOR":
                                 f"SAI_MY_SID_ENTRY_ENDPOINT_BEHAVIOR_{behavior}",
                                 **{f"SAI_MY_SID_ENTRY_ATTR_{k.upper()}": v
                                    for k, v in attrs.items()}}, key)
        return key


def program_chain(sw: dict[str, Switch]) -> None:
    sw["r1"].policy("fd00:b::/64", TO_R3_V6, "SAI_SRV6_SIDLIST_TYPE_ENCAPS")
    sw["r1"].policy("10.0.2.0/24", TO_R3_V4, "SAI_SRV6_SIDLIST_TYPE_ENCAPS_RED")
    sw["r1"].policy("10.0.3.0/24", TO_R3_DT4, "SAI_SRV6_SIDLIST_TYPE_ENCAPS")
    for prefix in ("fd00:d::/64", "10.0.4.0/24"):
        sw["r1"].policy(prefix, TO_R3_DT46, "SAI_SRV6_SIDLIST_TYPE_ENCAPS")
    sw["r2"].sid("fcbb:bbbb:2::e", "X", next_hop_id=sw["r2"].hop("fd00:23::2", "b"))
    sw["r2"].sid("fcbb:bbbb:2::1", "E")
    sw["r3"].sid("fcbb:bbbb:3::d6", "DT6", vrf=sw["r3"].sai.default_vr)
    for sids, behavior in ((TO_R3_DT4, "DT4"), (TO_R3_DT46, "DT46")):
        sw["r3"].sid(sids[1], behavior, vrf=sw["r3"].sai.default_vr)
    sw["r3"].sid(TO_R3_V4[1], "DX4", next_hop_id=sw["r3"].hop("10.0.2.2", "b"))


@dataclass
class Chain:
    names: dict[str, str]  # node -> namespace
    switches: dict[str, Switch]
    path: str
    directory: Path

    def port_back(self, node: str, iface: str) -> None:
        """Bring a port up again with what the kernel deleted when it went down, as a lab's
        zebra puts it back: its addresses and the node's routes in the SAI table."""
        ns = self.names[node]
        sh(ns, "ip", "link", "set", "dev", iface, "up")
        for end, end_iface, peer, peer_iface, mine, theirs in LINKS:
            for address in (mine if (end, end_iface) == (node, iface) else
                            theirs if (peer, peer_iface) == (node, iface) else []):
                sh(ns, "ip", "addr", "replace", address, "dev", iface,
                   *(["nodad"] if ":" in address else []))
        _routes(ns, node, "replace")

    def restart(self, node: str) -> Switch:
        """A new switch over `node`'s kernel (and engine), as a restarted agent makes."""
        return Switch(self.names[node], self.directory / node, str(built(srv6_engine.ENGINE)),
                      self.path, warm=True)


def _routes(ns: str, node: str, verb: str) -> None:
    for route in ROUTES[node]:
        family = "-4" if "." in route.split()[0] else "-6"
        sh(ns, "ip", family, "route", verb, *route.split(), "table", str(SAI_TABLE))


@contextlib.contextmanager
def chain(path: str, directory: Path) -> Iterator[Chain]:
    """The chain, its switches on SRv6 `path` (kernel or userspace), engines under
    `directory`; gone (namespaces and engines) after the block."""
    with contextlib.ExitStack() as stack:
        names = {n: stack.enter_context(scratch_netns(f"srv6-{n}")) for n in NODES}
        for ns in names.values():  # addresses usable at once: no packet waits for DAD
            sh(ns, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0",
               "net.ipv6.conf.default.accept_dad=0")
        for node, iface, peer, peer_iface, mine, theirs in LINKS:
            subprocess.run(["ip", "link", "add", f"{node}-{iface}", "netns", names[node], "type",
                            "veth", "peer", "name", f"{peer}-{peer_iface}", "netns",
                            names[peer]], check=True)
            for ns, old, new, addresses in ((names[node], f"{node}-{iface}", iface, mine),
                                            (names[peer], f"{peer}-{peer_iface}", peer_iface,
                                             theirs)):
                sh(ns, "ip", "link", "set", old, "name", new, "up")
                for address in addresses:
                    sh(ns, "ip", "addr", "add", address, "dev", new, *(
                        ["nodad"] if ":" in address else []))
        for node, ns in names.items():
            sh(ns, "ip", "link", "set", "lo", "up")
            if node.startswith("h"):
                sh(ns, "ip", "-6", "route", "add", "default", "via",
                   "fd00:a::1" if node == "ha" else "fd00:b::1")
                sh(ns, "ip", "route", "add", "default", "via",
                   "10.0.1.1" if node == "ha" else "10.0.2.1")
                continue
            sh(ns, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1", "net.ipv4.ip_forward=1")
            sh(ns, "ip", "addr", "add", f"{LOOPBACK[node]}/128", "dev", "lo")
            sh(ns, "ip", "rule", "add", "pref", "1000", "lookup", str(SAI_TABLE))
            sh(ns, "ip", "-6", "rule", "add", "pref", "1000", "lookup", str(SAI_TABLE))
            _routes(ns, node, "add")
        program = str(built(srv6_engine.ENGINE))
        switches = {node: Switch(names[node], directory / node, program, path)
                    for node in ("r1", "r2", "r3")}
        program_chain(switches)
        yield Chain(names, switches, path, directory)
