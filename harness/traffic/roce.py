"""RoCEv2-shaped packets for QoS checks: UDP to port 4791 carrying InfiniBand's base transport
header (BTH), marked with a DSCP, sent from inside a node.

scapy builds them (its RoCE layer fills the BTH and the invariant CRC as a NIC would); it comes
with the test extra, which is what sends them. They go out through a raw IP socket in the
node's namespace, so the node's own routes take them, on every runtime.
"""

from __future__ import annotations

import socket

from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.packet import Raw

from harness.linux.nsenter import call_in_netns

ROCE_PORT = 4791
SEND_ONLY = 0x04  # RC SEND Only: one message in one packet
CNP = 0x81  # congestion notification packet, the receiver's answer to an ECN mark


def roce_packet(src: str, dst: str, dscp: int, opcode: int = SEND_ONLY, qp: int = 0x11,
                psn: int = 0, payload: int = 256) -> bytes:
    """One packet of queue pair `qp` (its UDP source port, as NICs spread QPs); IPv6 when the
    addresses are."""
    ip = IPv6(src=src, dst=dst, tc=dscp << 2) if ":" in dst else IP(src=src, dst=dst,
                                                                    tos=dscp << 2)
    return bytes(ip / UDP(sport=0xC000 | qp, dport=ROCE_PORT)
                 / BTH(opcode=opcode, dqpn=qp, psn=psn) / Raw(b"\0" * payload))


def send_from(netns_path: str, packets: list[bytes]) -> None:
    """Each packet as it is (IP header included) from inside the namespace."""
    def send() -> None:
        for packet in packets:
            v6 = packet[0] >> 4 == 6  # an IPPROTO_RAW socket of either family takes the header
            family = socket.AF_INET6 if v6 else socket.AF_INET
            with socket.socket(family, socket.SOCK_RAW, socket.IPPROTO_RAW) as sock:
                sock.sendto(packet, (socket.inet_ntop(family, packet[24:40] if v6
                                                      else packet[16:20]), 0))
    call_in_netns(netns_path, send)
