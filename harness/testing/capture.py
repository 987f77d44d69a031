"""Packet captures on a lab's ports for tests: tcpdump on each port for a block, then the
packets as scapy reads them.

Each port is captured inbound only (what its node received). An impaired link's engine sends
its frames past the sending port's taps (PACKET_QDISC_BYPASS, see fl_impair.c), so the
receiving end is where a link's traffic is seen whole.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from typing import Any

from scapy.layers.inet import IP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrSegmentRouting
from scapy.utils import rdpcap

from harness.deploy.lab import Lab

SETTLE_S = 0.3  # what was sent just before the block ends is still on its way


@contextlib.contextmanager
def capture(lab: Lab, ports: list[tuple[str, str]], expression: str = "ip6 or ip"
            ) -> Iterator[dict[tuple[str, str], list[Any]]]:
    """tcpdump on each (node, port) for the block; the packets each received, after it. The
    files are kept in the node's directory (which every runtime shares with its node)."""
    found: dict[tuple[str, str], list[Any]] = {}
    running = []
    try:
        for node, port in ports:
            pcap = lab.node_dir(node) / f"capture-{port}-{time.monotonic_ns()}.pcap"
            proc = lab.node(node).popen(["tcpdump", "-U", "-n", "--immediate-mode", "-Q", "in",
                                         "-i", port, "-w", str(pcap), expression],
                                        stderr=subprocess.PIPE, text=True)
            running.append((node, port, pcap, proc))
            assert proc.stderr is not None
            line = proc.stderr.readline()
            if "listening on" not in line:
                raise RuntimeError(f"tcpdump on {node}:{port}: {line.strip()}")
        yield found
        time.sleep(SETTLE_S)
    finally:
        for node, port, pcap, proc in running:
            proc.terminate()
            proc.wait(timeout=5)
            found[(node, port)] = list(rdpcap(str(pcap))) if pcap.exists() else []


def innermost(packet: Any) -> Any:
    """The packet an SRv6 encapsulation carries (or the packet itself)."""
    if IPv6ExtHdrSegmentRouting in packet:
        inner = packet[IPv6ExtHdrSegmentRouting].payload
        return inner if isinstance(inner, IPv6 | IP) else packet
    for layer in (IPv6, IP):
        if layer in packet:
            return packet[layer]
    return packet


def towards(packets: list[Any], address: str) -> list[Any]:
    """Those whose innermost packet is addressed to `address`."""
    return [p for p in packets if getattr(innermost(p), "dst", None) == address]
