"""The lab's recorder: one process per lab, in the host's namespaces, writing to the lab's
event record (harness/core/events.py) what changes in its nodes: ports going down and up,
routes changing (as counts), BFD sessions and BGP sessions going down and up.

It listens and never asks the daemons: a netlink socket inside each node's namespace for its
links and routes, each node's BFD feed (its offload engine's, or bfdd's control socket; the
spray agent's sources, harness/spray/bfd.py), and the tail of each bgpd's log for its
%ADJCHANGE lines (stamped to the microsecond in UTC, harness/nodes/frr.py). Route changes come
in bursts (a plane lost is hundreds of routes on every host), so a node's are counted and said
once it has been quiet for ROUTE_QUIET_S, stamped with the burst's first change.

Usage (deploy starts it once the lab converged, harness/instruments/recording.py; destroy ends
it): python -m harness.instruments.recorder CONFIG.json
"""

from __future__ import annotations

import contextlib
import datetime
import json
import re
import selectors
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.events import Event, in_time_order, record
from harness.linux.nsenter import call_in_netns
from harness.linux.rtnl_batch import (
    IFINFOMSG,
    RTMGRP_IPV4_ROUTE,
    RTMGRP_IPV6_ROUTE,
    RTMGRP_LINK,
    dump_links,
    link_name,
    split,
    subscribe,
)
from harness.linux.rtnl_route import RTM_DELROUTE, RTM_NEWROUTE, RTMSG, attributes
from harness.spray.bfd import BfdWatch, EngineWatch

SOURCE = "recorder"
RTM_NEWLINK = 16
IFLA_OPERSTATE, IF_OPER_UP = 16, 6
RTPROT_KERNEL, RT_TABLE_LOCAL = 2, 255  # the kernel's own routes and the spray tables' say
EVENT_RCVBUF = 8 << 20
ROUTE_QUIET_S = 0.2
TAIL_EVERY_S = 0.2  # bgpd's logs are read this often
RETRY_S = 1.0  # a BFD feed that is not there (yet, or its engine restarting)
ADJCHANGE = re.compile(r"^(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)?) BGP: .*%ADJCHANGE: "
                       r"neighbor (\S+?)(?:\(([^)]*)\))? in vrf \S+ (Up|Down)\s*(.*)$")


def log_time(stamp: str) -> float:
    """An FRR log stamp ('2026/12/07 21:38:42.123456', UTC) as wall-clock seconds."""
    layout = "%Y/%m/%d %H:%M:%S.%f" if "." in stamp else "%Y/%m/%d %H:%M:%S"
    return datetime.datetime.strptime(stamp, layout).replace(
        tzinfo=datetime.UTC).timestamp()


def adjchange(node: str, line: str, peers: dict[str, str]) -> Event | None:
    """A BGP session's state change from one line of bgpd's log, or None. The peer's node is
    the plan's (FRR's name for it is the peer's hostname, the host's own in a namespace)."""
    found = ADJCHANGE.match(line)
    if found is None:
        return None
    stamp, peer, _, state, reason = found.groups()
    detail = {"peer": peer, "peer_node": peers.get(peer), "reason": reason or None}
    return Event(log_time(stamp), "bgp", "up" if state == "Up" else "down", node, detail)


@dataclass
class Burst:
    """A node's route changes since it was last quiet."""

    first: float = 0.0
    last: float = 0.0
    added: int = 0
    removed: int = 0


@dataclass
class NodeWatch:
    name: str
    netns: str
    ports: set[str]
    bgp_log: Path | None
    bfd: dict[str, str]  # {"engine": feed} or {"bfdd": control socket}, or {} (no BFD)
    peers: dict[str, str]  # a session's peer address -> the peer's node
    sock: socket.socket | None = None
    operstate: dict[str, bool] = field(default_factory=dict)
    burst: Burst = field(default_factory=Burst)
    log_offset: int = 0
    feed: BfdWatch | EngineWatch | None = None
    sessions: dict[tuple[str, str], bool] = field(default_factory=dict)
    feed_tried: float = 0.0

    def subscribe(self) -> None:
        """The node's netlink socket, and its ports' states now (no event for those)."""
        def opened() -> tuple[socket.socket, list[bytes]]:
            sock = subscribe(RTMGRP_LINK | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE, EVENT_RCVBUF)
            with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) as ask:
                links = list(dump_links(ask, 1))
            return sock, links
        self.sock, links = call_in_netns(self.netns, opened)
        for body in links:
            self.link(body)
        if self.bgp_log is not None:
            with contextlib.suppress(OSError):
                self.log_offset = self.bgp_log.stat().st_size

    def link(self, body: bytes) -> Event | None:
        """A port's new state, as an event when it changed."""
        values = attributes(body, IFINFOMSG.size)
        name = link_name(values)
        if name not in self.ports or IFLA_OPERSTATE not in values:
            return None
        up = values[IFLA_OPERSTATE][0] == IF_OPER_UP
        known = self.operstate.get(name)
        self.operstate[name] = up
        if known is None or known == up:
            return None
        return Event(time.time(), "link", "up" if up else "down", self.name, {"port": name})

    def netlink(self) -> list[Event]:
        assert self.sock is not None
        events = []
        now = time.time()
        with contextlib.suppress(BlockingIOError):
            while data := self.sock.recv(1 << 20):
                for kind, _, body in split(data):
                    if kind == RTM_NEWLINK and (event := self.link(body)):
                        events.append(event)
                    elif kind in (RTM_NEWROUTE, RTM_DELROUTE):
                        self.route(kind, body, now)
        return events

    def route(self, kind: int, body: bytes, now: float) -> None:
        _, _, _, _, table, protocol, _, _, _ = RTMSG.unpack_from(body)
        if protocol == RTPROT_KERNEL or table == RT_TABLE_LOCAL:
            return
        burst = self.burst
        if not burst.added and not burst.removed:
            burst.first = now
        burst.last = now
        if kind == RTM_NEWROUTE:
            burst.added += 1
        else:
            burst.removed += 1

    def quiet_burst(self, now: float) -> Event | None:
        burst = self.burst
        if not (burst.added or burst.removed) or now - burst.last < ROUTE_QUIET_S:
            return None
        self.burst = Burst()
        return Event(burst.first, "routes", "changed", self.name,
                     {"installed": burst.added, "removed": burst.removed,
                      "took_ms": round((burst.last - burst.first) * 1000, 3)})

    def bgp(self) -> list[Event]:
        """%ADJCHANGE lines bgpd wrote since the last look."""
        if self.bgp_log is None:
            return []
        try:
            with self.bgp_log.open("rb") as f:
                f.seek(self.log_offset)
                data = f.read()
        except OSError:
            return []
        whole = data[:data.rfind(b"\n") + 1]
        self.log_offset += len(whole)
        return [e for line in whole.decode(errors="replace").splitlines()
                if (e := adjchange(self.name, line, self.peers)) is not None]

    def connect_feed(self, now: float) -> bool:
        if self.feed is not None or not self.bfd or now - self.feed_tried < RETRY_S:
            return False
        self.feed_tried = now
        (kind, path), = self.bfd.items()
        try:
            self.feed = EngineWatch(path) if kind == "engine" else BfdWatch(path)
        except OSError:
            return False
        return True

    def bfd_states(self) -> list[Event]:
        """Sessions whose state changed; the states a (re)connected feed first tells are
        what it was, not changes, unless they differ from what was last heard."""
        assert self.feed is not None
        states = self.feed.read()
        if states is None:
            self.feed = None
            return []
        events = []
        for state in states:
            key = (state.nic, state.peer)
            known = self.sessions.get(key)
            self.sessions[key] = state.up
            if known is not None and known != state.up:
                events.append(Event(state.judged or time.time(), "bfd",
                                    "up" if state.up else "down", self.name,
                                    {"port": state.nic, "peer": state.peer,
                                     "peer_node": self.peers.get(state.peer)}))
        return events


class Recorder:
    def __init__(self, config: dict[str, Any]) -> None:
        self.lab_dir = Path(config["lab_dir"])
        self.nodes = [NodeWatch(n["name"], n["netns"], set(n["ports"]),
                                Path(n["bgp_log"]) if n.get("bgp_log") else None, n["bfd"],
                                n["peers"]) for n in config["nodes"]]
        self.selector = selectors.DefaultSelector()
        for node in self.nodes:
            node.subscribe()
            assert node.sock is not None
            self.selector.register(node.sock, selectors.EVENT_READ, (node, "netlink"))

    def run(self) -> None:
        record(self.lab_dir, [Event(time.time(), "recorder", "listening", None,
                                    {"nodes": len(self.nodes)})], SOURCE)
        tailed = 0.0
        while self.lab_dir.is_dir():  # destroy removes it (and ends this process)
            now = time.time()
            events: list[Event] = []
            for node in self.nodes:
                if node.connect_feed(now):
                    assert node.feed is not None
                    self.selector.register(node.feed, selectors.EVENT_READ, (node, "bfd"))
            for key, _ in self.selector.select(TAIL_EVERY_S):
                node, what = key.data
                if what == "netlink":
                    events += node.netlink()
                else:
                    feed = node.feed
                    events += node.bfd_states()
                    if node.feed is None:
                        self.selector.unregister(feed)
            now = time.time()
            if now - tailed >= TAIL_EVERY_S:
                tailed = now
                for node in self.nodes:
                    events += node.bgp()
            events += [e for node in self.nodes if (e := node.quiet_burst(now))]
            record(self.lab_dir, in_time_order(events), SOURCE)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    Recorder(json.loads(Path(argv[0]).read_text())).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
