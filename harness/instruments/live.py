"""The live view's state (`labctl serve`): the lab's graph with each link's state, rate and
faults, and the event stream beside it, as one JSON document the page polls.

No second source: link and session states are replayed from the lab's event record (the
recorder's link, BFD and BGP events, harness/core/events.py), and faults are the records
`inspect` and `labctl fault list` read. Only the rates are read here, from each port's kernel
counters (one netlink socket kept open per node), since nothing else measures them.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.core.events import Event, Follower
from harness.faults import records
from harness.linux.nsenter import call_in_netns
from harness.linux.rtnl_batch import IFINFOMSG, dump_links, link_name
from harness.linux.rtnl_route import attributes
from harness.topology.plan import Endpoint
from harness.topology.units import format_rate_bps

if TYPE_CHECKING:
    from harness.runtime.context import LabContext

IFLA_STATS64 = 23
STATS64_BYTES = struct.Struct("=QQQQ")  # rx_packets, tx_packets, rx_bytes, tx_bytes
EVENTS_SHOWN = 200


@dataclass
class Counters:
    """A node's ports' transmitted bytes, read through one netlink socket in its namespace."""

    sock: socket.socket
    seq: int = 1

    def tx_bytes(self) -> dict[str, int]:
        self.seq += 1
        found = {}
        for body in dump_links(self.sock, self.seq):
            values = attributes(body, IFINFOMSG.size)
            if IFLA_STATS64 in values:
                found[link_name(values)] = STATS64_BYTES.unpack_from(values[IFLA_STATS64])[3]
        return found


@dataclass
class LiveState:
    lab: LabContext
    follower: Follower = field(init=False)
    port_up: dict[Endpoint, bool] = field(default_factory=dict)
    session_up: dict[tuple[str, str], bool] = field(default_factory=dict)  # (kind, end)
    events: deque[str] = field(default_factory=lambda: deque(maxlen=EVENTS_SHOWN))
    counters: dict[str, Counters] = field(default_factory=dict)
    last: tuple[float, dict[Endpoint, int]] = (0.0, {})

    def __post_init__(self) -> None:
        self.follower = Follower(self.lab.dir, from_start=True)
        plan = self.lab.plan
        self.end_of_peer = {(s.node, s.peer_ip): Endpoint(node=s.node, iface=s.iface)
                            for s in plan.sessions}

    def _apply(self, event: Event) -> None:
        """What an event says of a port or a session; kept for the stream too."""
        self.events.append(event.text())
        up = event.what == "up"
        if event.node is None or event.what not in ("up", "down"):
            return
        if event.kind == "link":
            self.port_up[Endpoint(node=event.node, iface=event.detail["port"])] = up
        elif event.kind == "bfd" and "port" in event.detail:
            self.session_up[("bfd", f"{event.node}:{event.detail['port']}")] = up
        elif event.kind == "bgp" and (end := self.end_of_peer.get(
                (event.node, event.detail.get("peer", "")))):
            self.session_up[("bgp", str(end))] = up

    def _rates(self) -> dict[Endpoint, int]:
        """Bits per second each port sent since the last look."""
        now, sent = time.monotonic(), {}
        for node in self.lab.node_names:
            with contextlib.suppress(OSError):
                if node not in self.counters:
                    self.counters[node] = Counters(call_in_netns(
                        self.lab.runtime.netns_path(node), lambda: socket.socket(
                            socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)))
                for port, tx in self.counters[node].tx_bytes().items():
                    sent[Endpoint(node=node, iface=port)] = tx
        then, before = self.last
        self.last = (now, sent)
        if not then:
            return {}
        return {end: round(8 * (tx - before[end]) / (now - then))
                for end, tx in sent.items() if end in before and tx >= before[end]}

    def link_state(self, a: Endpoint, b: Endpoint) -> str:
        if not (self.port_up.get(a, True) and self.port_up.get(b, True)):
            return "down"
        sessions = [self.session_up.get((kind, str(end)), True)
                    for kind in ("bfd", "bgp") for end in (a, b)]
        return "up" if all(sessions) else "sessions down"

    def snapshot(self) -> dict[str, Any]:
        for event in self.follower.poll():
            self._apply(event)
        rates = self._rates()
        links = {}
        for link in self.lab.plan.links:
            bps = max(rates.get(link.a, 0), rates.get(link.b, 0))
            links[link.name] = {"state": self.link_state(link.a, link.b),
                                "rate": format_rate_bps(bps) if bps else ""}
        return {"lab": self.lab.plan.name, "links": links, "events": list(self.events),
                "faults": [str(r) for r in records.load_all(self.lab.dir)],
                "time": time.time()}
