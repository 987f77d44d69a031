"""The SAI dataplane's SRv6 on the wire, on both paths: the kernel's seg6 where it has it, and
the userspace engine fl-srv6 (which every kernel runs, forced here where seg6 exists), on the
chain of testing/srv6_chain.py. Captures on r2's and r3's upstream ports show the SRH with
Segments Left going down hop by hop, and the receiving host sees the hop limit and TTL one
router each takes.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from ipaddress import IPv6Address
from pathlib import Path

import pytest
from scapy.layers.inet import ICMP, IP
from scapy.layers.inet6 import ICMPv6EchoRequest, IPv6, IPv6ExtHdrSegmentRouting
from scapy.utils import rdpcap

from harness.linux.features import feature, has
from harness.nodes.switch.sai import srv6_engine
from harness.nodes.switch.sai.kernel import SAI_TABLE
from harness.nodes.switch.sai.types import MySidKey, ObjectType
from harness.testing import srv6_chain
from harness.testing.srv6_chain import (
    LOOPBACK,
    TO_R3_DT4,
    TO_R3_DT46,
    TO_R3_V4,
    TO_R3_V6,
    Chain,
    sh,
)

T = ObjectType

pytestmark = pytest.mark.e2e


@pytest.fixture(params=["userspace", "kernel"])
def chain(request, tmp_path: Path) -> Iterator[Chain]:
    if request.param == "kernel" and not (has("seg6") and has("seg6local")):
        pytest.skip(f"this kernel has no seg6 ({feature('seg6').detail}): the userspace path "
                    "is the one that runs here")
    with srv6_chain.chain(request.param, tmp_path) as built_chain:
        yield built_chain


@contextlib.contextmanager
def captures(names: dict[str, str], where: list[tuple[str, str]], tmp: Path
             ) -> Iterator[dict[tuple[str, str], list]]:
    """tcpdump on each (node, interface) for the block; the packets it received, after it."""
    found: dict[tuple[str, str], list] = {}
    procs = []
    for node, iface in where:
        pcap = tmp / f"{node}-{iface}.pcap"
        proc = subprocess.Popen(["ip", "netns", "exec", names[node], "tcpdump", "-U", "-n",
                                 "--immediate-mode", "-Q", "in", "-i", iface, "-w", str(pcap),
                                 "ip6 or ip"], stderr=subprocess.PIPE, text=True)
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
    encaps_end_x_and_end_dt6_on_the_wire(chain, tmp_path)


def test_the_frame_at_a_time_engine_does_the_same(chain: Chain, tmp_path: Path) -> None:
    """`batch 0`, the benches' baseline, reads the TAP a frame at a time: the same packets on
    the wire; a value other than 0 or 1 is refused."""
    if chain.path != "userspace":
        pytest.skip("the kernel's seg6 has no engine")
    for node in ("r1", "r2", "r3"):
        engine = srv6_engine.Engine(chain.directory / node)
        assert engine.request("batch 0") == "ok"
        assert engine.request("batch 2").startswith("error")
    encaps_end_x_and_end_dt6_on_the_wire(chain, tmp_path)


def encaps_end_x_and_end_dt6_on_the_wire(chain: Chain, tmp_path: Path) -> None:
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
    # one hop for r3, which forwarded the inner packet; r1 carried it (its outer header took
    # the hop) and r2 never saw it
    assert [(p.src, p.hlim, IPv6ExtHdrSegmentRouting in p) for p in delivered] == \
        [("fd00:a::2", 63, False)] * 3, delivered


def test_h_encaps_red_end_and_end_dx4_carry_ipv4(chain: Chain, tmp_path: Path) -> None:
    """No IPv4 between the routers: only the SRv6 path can get it to hb (nor back)."""
    where = [("r2", "a"), ("r3", "a"), ("hb", "a")]
    with captures(chain.names, where, tmp_path) as seen:
        sh(chain.names["ha"], "ping", "-4", "-c", "3", "-i", "0.2", "-W", "1", "10.0.2.2",
           check=False)
    # reduced: the first segment is only in the destination; one left in the SRH. The outer
    # header starts at 64 over IPv4 and loses one per router; the TTL only at r3's End.DX4.
    assert srh_hops(seen[("r2", "a")]) == [(TO_R3_V4[0], 1, [TO_R3_V4[1]], 63)] * 3
    assert srh_hops(seen[("r3", "a")]) == [(TO_R3_V4[1], 0, [TO_R3_V4[1]], 62)] * 3
    requests = [p[IP] for p in seen[("hb", "a")] if ICMP in p and p[ICMP].type == 8]
    assert [(p.src, p.dst, p.ttl) for p in requests] == [("10.0.1.2", "10.0.2.2", 63)] * 3
    for packet in requests:
        sent = packet.chksum
        del packet.chksum
        assert IP(bytes(packet)).chksum == sent  # the TTL's checksum update is right


def test_end_dt4_and_end_dt46_hand_the_inner_packet_to_the_tails_lookup(chain: Chain,
                                                                        tmp_path: Path) -> None:
    """r3 has no route of its own for the SIDs' payload: only its table lookup after the
    decapsulation (the kernel's through its VRF device, or the engine's handing back) gets
    each packet to hb, one hop later (TTL and hop limit 63, as End.DT6's)."""
    where = [("r3", "a"), ("hb", "a")]
    with captures(chain.names, where, tmp_path) as seen:
        for family, address in (("-4", "10.0.3.2"), ("-4", "10.0.4.2"), ("-6", "fd00:d::2")):
            sh(chain.names["ha"], "ping", family, "-c", "3", "-i", "0.2", "-W", "1", address,
               check=False)
    assert srh_hops(seen[("r3", "a")]) == \
        [(TO_R3_DT4[1], 0, list(reversed(TO_R3_DT4)), 62)] * 3 + \
        [(TO_R3_DT46[1], 0, list(reversed(TO_R3_DT46)), 62)] * 6, seen[("r3", "a")]
    requests = [p[IP] for p in seen[("hb", "a")] if ICMP in p and p[ICMP].type == 8]
    assert [(p.dst, p.ttl) for p in requests] == [("10.0.3.2", 63)] * 3 + [("10.0.4.2", 63)] * 3
    delivered = [p[IPv6] for p in seen[("hb", "a")] if ICMPv6EchoRequest in p]
    assert [(p.dst, p.hlim, IPv6ExtHdrSegmentRouting in p) for p in delivered] == \
        [("fd00:d::2", 63, False)] * 3, delivered
    if chain.path == "userspace":
        sids = srv6_engine.Engine(tmp_path / "r3").show().sids
        assert (sids[TO_R3_DT4[1]]["packets"], sids[TO_R3_DT46[1]]["packets"]) == (3, 6), sids


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
            ",".join(TO_R3_V6): 2, ",".join(TO_R3_V4): 0, ",".join(TO_R3_DT4): 0,
            ",".join(TO_R3_DT46): 0}, r1
    sai = chain.switches["r2"].sai
    assert sai.remove(MySidKey(sai.default_vr, IPv6Address(TO_R3_V6[0]))).ok
    assert " 100% packet loss" in sh(chain.names["ha"], *ping, check=False)
    assert sh(chain.names["r2"], "ip", "-6", "route", "show", "table", str(SAI_TABLE),
              TO_R3_V6[0]) == ""
    if chain.path == "userspace":
        assert TO_R3_V6[0] not in r2.show().sids


def test_an_end_x_crosses_its_port_again_once_the_port_is_back(chain: Chain) -> None:
    """The kernel deletes a port's routes when it goes down and never restores them; an
    ASIC keeps its SIDs. With the port up and its routes back (zebra's part in a lab), r2's
    End.X crosses it again."""
    ping = ["ping", "-6", "-c", "2", "-i", "0.2", "-W", "1", "fd00:b::2"]
    assert " 0% packet loss" in sh(chain.names["ha"], *ping, check=False)
    sh(chain.names["r2"], "ip", "link", "set", "dev", "b", "down")
    assert " 100% packet loss" in sh(chain.names["ha"], *ping, check=False)
    chain.port_back("r2", "b")
    out = sh(chain.names["ha"], *ping, check=False)
    assert " 0% packet loss" in out, out


def srv6_objects(sai) -> dict[str, list]:
    """A switch's SRv6 state by content: SID lists, and my-SIDs with where they cross to."""
    hops = sai.objects(T.NEXT_HOP)
    return {"lists": sorted((r.type, r.segment_list) for r in sai.objects(
                T.SRV6_SIDLIST).values()),
            "sids": sorted((str(k.sid), r.endpoint_behavior,
                            str(hops[r.next_hop_id].ip) if r.next_hop_id else None)
                           for k, r in sai.objects(T.MY_SID_ENTRY).items()),
            "routes": sorted(str(k.destination) for k, r in sai.objects(T.ROUTE_ENTRY).items()
                             if getattr(hops.get(r.next_hop_id), "srv6_sidlist_id", 0))}


def test_a_warm_restart_reads_the_srv6_state_back_and_keeps_it_working(chain: Chain) -> None:
    """A restarted agent's switch holds the same SID lists, my-SIDs and SRv6 routes, read from
    the kernel (and the engine), without touching them; then it can change them."""
    def state(node: str) -> tuple[str, tuple[dict, dict] | None]:
        """The kernel's SRv6 routes and next hops, and the engine's SIDs and lists with their
        counters. Not its count of other frames: a neighbour solicitation during the restart
        adds one, and it is no SRv6 state."""
        ns = chain.names[node]
        engine = srv6_engine.Engine(chain.directory / node)
        shown = engine.show() if engine.answers() else None
        return (sh(ns, "ip", "-6", "route", "show", "table", str(SAI_TABLE)) +
                sh(ns, "ip", "nexthop", "show"),
                (shown.sids, shown.lists) if shown else None)
    restarted = {}
    for node, old in chain.switches.items():
        before = state(node)
        restarted[node] = chain.restart(node)
        assert restarted[node].sai.warm_adopt() > 0
        assert srv6_objects(restarted[node].sai) == srv6_objects(old.sai), node
        assert state(node) == before, node
    ping = ["ping", "-6", "-c", "2", "-i", "0.2", "-W", "1", "fd00:b::2"]
    assert " 0% packet loss" in sh(chain.names["ha"], *ping, check=False)
    sai = restarted["r2"].sai
    assert sai.remove(MySidKey(sai.default_vr, IPv6Address(TO_R3_V6[0]))).ok
    assert " 100% packet loss" in sh(chain.names["ha"], *ping, check=False)
