"""Packet captures on a lab's ports for tests: the lab's own capture instrument
(harness/instruments/capture.py) on each port for a block, then the packets each port received,
as scapy reads them.

Each port's inbound frames only: a link's traffic is seen whole where it arrives, and a frame
counted at both ends would be counted twice.
"""

from __future__ import annotations

import contextlib
import io
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scapy.layers.inet import IP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrSegmentRouting
from scapy.utils import PcapNgReader

from harness.deploy.lab import Lab
from harness.instruments.capture import Capture
from harness.instruments.pcapng import INBOUND
from harness.testing.chaos import LABCTL
from harness.topology.plan import Endpoint

SETTLE_S = 0.3  # what was sent just before the block ends is still on its way


@contextlib.contextmanager
def capture(lab: Lab, ports: list[tuple[str, str]], expression: str = "ip6 or ip"
            ) -> Iterator[dict[tuple[str, str], list[Any]]]:
    """Capture on each (node, port) for the block; the packets each received, after it."""
    found: dict[tuple[str, str], list[Any]] = {port: [] for port in ports}
    out, stop, failed = io.BytesIO(), threading.Event(), []

    def run(cap: Capture) -> None:
        try:
            cap.run(stop=stop.is_set)
        except BaseException as exc:  # raised again in the test's thread
            failed.append(exc)
    with Capture(lab, [Endpoint(node=n, iface=p) for n, p in ports], out,
                 expression=expression) as cap:
        thread = threading.Thread(target=run, args=(cap,))
        thread.start()
        try:
            yield found
            time.sleep(SETTLE_S)
        finally:
            stop.set()
            thread.join()
    if failed:
        raise failed[0]
    for packet in PcapNgReader(io.BytesIO(out.getvalue())):
        if packet.direction == INBOUND:
            node, _, port = packet.sniffed_on.partition(":")
            found[(node, port)].append(packet)


@contextlib.contextmanager
def labctl_capture(lab: Lab, targets: list[str], expression: str, pcap: Path
                   ) -> Iterator[list[str]]:
    """`labctl capture` as a user runs it, into `pcap` for the block, stopped as Ctrl-C stops
    it; what it says: its first line once it captures, the rest after the block."""
    proc = subprocess.Popen([*LABCTL, "capture", lab.plan.name, *targets, "-f", expression,
                             "-w", str(pcap)], stderr=subprocess.PIPE, text=True)
    said: list[str] = []
    try:
        assert proc.stderr is not None
        said.append(proc.stderr.readline())
        assert "capturing on" in said[0], said
        yield said
    finally:
        proc.send_signal(signal.SIGINT)
        said.append(proc.communicate(timeout=30)[1])
    assert proc.returncode == 0, said


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
