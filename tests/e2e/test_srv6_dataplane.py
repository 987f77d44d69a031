"""The SAI dataplane's SRv6 on the wire, on both paths: the kernel's seg6 where it has it, and
the userspace engine fl-srv6 (which every kernel runs, forced here where seg6 exists).

    ha --a-- r1 --b/a-- r2 --b/a-- r3 --b-- hb

r1 encapsulates (H.Encaps: End.X at r2, End.DT6 at r3; H.Encaps.Red for IPv4: End at r2,
End.DX4 at r3); r2 and r3 hold the SIDs. Every route sits in the SAI table, as a lab's do.
Captures on r2's and r3's upstream ports show the SRH with Segments Left going down hop by hop,
and the receiving host sees the hop limit and TTL one router each takes.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from ipaddress import IPv6Address
from pathlib import Path

import pytest
from scapy.layers.inet import ICMP, IP
from scapy.layers.inet6 import ICMPv6EchoRequest, IPv6, IPv6ExtHdrSegmentRouting
from scapy.utils import rdpcap

from harness.build import built
from harness.kernel import feature, has
from harness.linux.nsenter import NETNS_RUN_DIR
from harness.linux.scratch import scratch_netns
from harness.sai import srv6_engine
from harness.sai.kernel import SAI_TABLE, KernelBackend
from harness.sai.seg6 import Srv6Setup
from harness.sai.switch import SaiSwitch
from harness.sai.types import IpPrefix, MySidKey, ObjectType, RouteKey

pytestmark = pytest.mark.e2e
T = ObjectType
NODES = ("ha", "r1", "r2", "r3", "hb")
# (node, interface, peer node, peer interface, addresses on this end, on the far end)
LINKS = [("ha", "a", "r1", "a", ["fd00:a::2/64", "10.0.1.2/24"], ["fd00:a::1/64", "10.0.1.1/24"]),
         ("r1", "b", "r2", "a", ["fd00:12::1/64"], ["fd00:12::2/64"]),
         ("r2", "b", "r3", "a", ["fd00:23::1/64"], ["fd00:23::2/64"]),
         ("r3", "b", "hb", "a", ["fd00:b::1/64", "10.0.2.1/24"], ["fd00:b::2/64", "10.0.2.2/24"])]
LOOPBACK = {"r1": "fd00:ff::1", "r2": "fd00:ff::2", "r3": "fd00:ff::3"}
ROUTES = {  # in the SAI table, like every route of a lab's switch
    "r1": ["fcbb:bbbb:2::/48 via fd00:12::2", "fcbb:bbbb:3::/48 via fd00:12::2",
           "fd00:b::/64 via fd00:12::2", "fd00:23::/64 via fd00:12::2"],
    "r2": ["fcbb:bbbb:3::/48 via fd00:23::2", "fd00:b::/64 via fd00:23::2",
           "fd00:a::/64 via fd00:12::1"],
    "r3": ["fd00:a::/64 via fd00:23::1", "fd00:12::/64 via fd00:23::1"]}
TO_R3_V6 = ["fcbb:bbbb:2::e", "fcbb:bbbb:3::d6"]  # End.X at r2, End.DT6 at r3
TO_R3_V4 = ["fcbb:bbbb:2::1", "fcbb:bbbb:3::d4"]  # End at r2, End.DX4 at r3


def sh(ns: str, *argv: str, check: bool = True) -> str:
    return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True,
                          check=check).stdout


@dataclass
class Chain:
    names: dict[str, str]  # node -> namespace
    switches: dict[str, Switch]
    path: str


@pytest.fixture(params=["userspace", "kernel"])
def chain(request, tmp_path: Path) -> Iterator[Chain]:
    path = request.param
    if path == "kernel" and not (has("seg6") and has("seg6local")):
        pytest.skip(f"this kernel has no seg6 ({feature('seg6').detail}): the userspace path "
                    "is the one that runs here")
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
            for route in ROUTES[node]:
                sh(ns, "ip", "-6", "route", "add", *route.split(), "table", str(SAI_TABLE))
        program = str(built(srv6_engine.ENGINE))
        switches = {node: Switch(names[node], tmp_path / node, program, path)
                    for node in ("r1", "r2", "r3")}
        program_chain(switches)
        yield Chain(names, switches, path)


class Switch:
    """A SAI switch over one namespace's kernel, with a port and router interface per link."""

    def __init__(self, ns: str, directory: Path, program: str, path: str) -> None:
        directory.mkdir()
        self.backend = KernelBackend(f"{NETNS_RUN_DIR}/{ns}",
                                     srv6=Srv6Setup(directory, program, path))
        self.sai = SaiSwitch(self.backend, attrs={"SAI_SWITCH_ATTR_INIT_SWITCH": True})
        self.rif: dict[str, int] = {}
        for iface in ("a", "b"):
            lane = int(sh(ns, "cat", f"/sys/class/net/{iface}/ifindex"))
            _, port = self.sai.create(T.PORT, {"SAI_PORT_ATTR_HW_LANE_LIST": [lane]})
            _, self.rif[iface] = self.sai.create(T.ROUTER_INTERFACE, {  # type: ignore[assignment]
                "SAI_ROUTER_INTERFACE_ATTR_VIRTUAL_ROUTER_ID": self.sai.default_vr,
                "SAI_ROUTER_INTERFACE_ATTR_TYPE": "SAI_ROUTER_INTERFACE_TYPE_PORT",
                "SAI_ROUTER_INTERFACE_ATTR_PORT_ID": port})

    def ok(self, kind: T, attrs: dict, key=None) -> int:
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
    sw["r2"].sid("fcbb:bbbb:2::e", "X", next_hop_id=sw["r2"].hop("fd00:23::2", "b"))
    sw["r2"].sid("fcbb:bbbb:2::1", "E")
    sw["r3"].sid("fcbb:bbbb:3::d6", "DT6", vrf=sw["r3"].sai.default_vr)
    sw["r3"].sid("fcbb:bbbb:3::d4", "DX4", next_hop_id=sw["r3"].hop("10.0.2.2", "b"))


@contextlib.contextmanager
def captures(names: dict[str, str], where: list[tuple[str, str]], tmp: Path
             ) -> Iterator[dict[tuple[str, str], list]]:
    """tcpdump on each (node, interface) for the block; the packets after it."""
    found: dict[tuple[str, str], list] = {}
    procs = []
    for node, iface in where:
        pcap = tmp / f"{node}-{iface}.pcap"
        proc = subprocess.Popen(["ip", "netns", "exec", names[node], "tcpdump", "-U", "-n",
                                 "--immediate-mode", "-i", iface, "-w", str(pcap), "ip6 or ip"],
                                stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        assert "listening on" in proc.stderr.readline()
        procs.append((node, iface, pcap, proc))
    yield found
    time.sleep(0.2)
    for node, iface, pcap, proc in procs:
        proc.terminate()
        proc.wait(timeout=5)
        found[(node, iface)] = list(rdpcap(str(pcap)))


def srh_hops(packets: list) -> list[tuple[str, int, list[str], int]]:
    """(destination, Segments Left, Segment List, hop limit) of each packet with an SRH."""
    return [(p[IPv6].dst, p[IPv6ExtHdrSegmentRouting].segleft,
             list(p[IPv6ExtHdrSegmentRouting].addresses), p[IPv6].hlim)
            for p in packets if IPv6ExtHdrSegmentRouting in p]


def test_h_encaps_end_x_and_end_dt6_on_the_wire(chain: Chain, tmp_path: Path) -> None:
    where = [("r2", "a"), ("r3", "a"), ("hb", "a")]
    with captures(chain.names, where, tmp_path) as seen:
        out = sh(chain.names["ha"], "ping", "-6", "-c", "3", "-i", "0.2", "-W", "2", "fd00:b::2",
                 check=False)
    assert " 0% packet loss" in out, out
    # Segment List[0] is the last segment; r1 sent it at Segments Left 1 to r2's End.X
    list_ = list(reversed(TO_R3_V6))
    assert srh_hops(seen[("r2", "a")]) == [(TO_R3_V6[0], 1, list_, 63)] * 3, seen[("r2", "a")]
    assert srh_hops(seen[("r3", "a")]) == [(TO_R3_V6[1], 0, list_, 62)] * 3, seen[("r3", "a")]
    outer = next(p for p in seen[("r2", "a")] if IPv6ExtHdrSegmentRouting in p)[IPv6]
    assert outer.src == LOOPBACK["r1"]
    assert outer[IPv6ExtHdrSegmentRouting].payload[IPv6].dst == "fd00:b::2"
    delivered = [p[IPv6] for p in seen[("hb", "a")] if ICMPv6EchoRequest in p]
    # one hop each for r1 and r3, which forwarded the inner packet; none for r2, which did not
    assert [(p.src, p.hlim, IPv6ExtHdrSegmentRouting in p) for p in delivered] == \
        [("fd00:a::2", 62, False)] * 3, delivered


def test_h_encaps_red_end_and_end_dx4_carry_ipv4(chain: Chain, tmp_path: Path) -> None:
    """No IPv4 between the routers: only the SRv6 path can get it to hb (nor back)."""
    where = [("r2", "a"), ("r3", "a"), ("hb", "a")]
    with captures(chain.names, where, tmp_path) as seen:
        sh(chain.names["ha"], "ping", "-4", "-c", "3", "-i", "0.2", "-W", "1", "10.0.2.2",
           check=False)
    # reduced: the first segment is only in the destination; one left in the SRH
    assert srh_hops(seen[("r2", "a")]) == [(TO_R3_V4[0], 1, [TO_R3_V4[1]], 64)] * 3
    assert srh_hops(seen[("r3", "a")]) == [(TO_R3_V4[1], 0, [TO_R3_V4[1]], 63)] * 3
    requests = [p[IP] for p in seen[("hb", "a")] if ICMP in p and p[ICMP].type == 8]
    assert [(p.src, p.dst, p.ttl) for p in requests] == [("10.0.1.2", "10.0.2.2", 62)] * 3
    for packet in requests:
        sent = packet.chksum
        del packet.chksum
        assert IP(bytes(packet)).chksum == sent  # the TTL's checksum update is right


def test_the_engine_counts_and_a_removed_sid_stops_the_path(chain: Chain,
                                                           tmp_path: Path) -> None:
    ping = ["ping", "-6", "-c", "2", "-i", "0.2", "-W", "1", "fd00:b::2"]
    assert " 0% packet loss" in sh(chain.names["ha"], *ping, check=False)
    r2 = srv6_engine.Engine(tmp_path / "r2")
    assert r2.answers() == (chain.path == "userspace")
    if chain.path == "userspace":
        shown = r2.show()
        assert (shown.sids["fcbb:bbbb:2::e"]["packets"],
                shown.sids["fcbb:bbbb:2::1"]["packets"]) == (2, 0), shown
        r1 = srv6_engine.Engine(tmp_path / "r1").show()
        assert {row["segs"]: row["packets"] for row in r1.lists.values()} == {
            ",".join(TO_R3_V6): 2, ",".join(TO_R3_V4): 0}, r1
    sai = chain.switches["r2"].sai
    assert sai.remove(MySidKey(sai.default_vr, IPv6Address(TO_R3_V6[0]))).ok
    assert " 100% packet loss" in sh(chain.names["ha"], *ping, check=False)
    assert sh(chain.names["r2"], "ip", "-6", "route", "show", "table", str(SAI_TABLE),
              TO_R3_V6[0]) == ""
    if chain.path == "userspace":
        assert TO_R3_V6[0] not in r2.show().sids
