"""The spray agent: one per multi-plane host, running inside the host's namespace.

Three event sources, no polling:
- rtnetlink route events: a route to a host prefix in the main table names, through its next
  hops, the planes a destination is reachable on. When a plane's path breaks anywhere (a leaf
  uplink, a spine), BGP withdraws, zebra replaces the route without that next hop, and the
  event removes the plane for exactly the destinations it affected; when the path returns,
  so does the next hop and the plane is sprayed again.
- BFD (the node's BFD offload's feed, or bfdd's control socket when bfdd runs the sessions
  itself): when the BFD session on a plane NIC goes down, that plane is dead
  for every destination, so it leaves every spray set at once, without waiting for bgpd and
  zebra to process the withdrawal; it may return once BFD is up and the routes are back.
- the host's data-plane probes (harness/spray/probe.py), when the lab has them: a peer
  that stops hearing this host on a plane, or hears it with loss, says so within a few probe
  intervals, and the plane leaves the spray set to that peer (or, lossy to all peers, to every
  destination) at once; it returns once the peers hear it cleanly for a whole window (and
  BFD and the routes agree).

Link events re-read the main table (next hops die with their link without a route event).
A plane leaving a spray set is applied at once (traffic into it is being lost); planes
joining wait up to JOIN_BATCH_S for more, since a converging lab adds routes one next hop at
a time and rewriting the spray tables for each would cost a host seconds of CPU at deploy.
State is written to a JSON file for `inspect` and tests.

Usage (started by harness.spray.nic at deploy): python -m harness.spray.agent CONFIG.json
"""

from __future__ import annotations

import errno
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from ipaddress import ip_address
from pathlib import Path
from typing import Any

from harness.linux.files import replace_file
from harness.linux.libnft import Nft
from harness.linux.rtnl_batch import (
    RTMGRP_IPV4_ROUTE,
    RTMGRP_IPV6_ROUTE,
    RTMGRP_LINK,
    split,
    subscribe,
)
from harness.linux.rtnl_channel import Channel
from harness.linux.rtnl_messages import (
    NLM_F_CREATE,
    NLM_F_REPLACE,
    route_message,
    unpack_address,
)
from harness.linux.rtnl_route import (
    HOST_LEN,
    RTA_DST,
    RTM_DELROUTE,
    RTM_NEWROUTE,
    RTMSG,
    attributes,
    dump_routes,
    next_hops,
    table_of,
)
from harness.spray.bfd import BfdWatch, EngineWatch
from harness.spray.probe import EVERY_PEER, ProbeEngine
from harness.spray.ruleset import (
    RULE_PREF_BASE,
    nft_ruleset,
    plane_mark,
    plane_table,
)

RT_TABLE_MAIN = 254
RTNH_F_DEAD, RTNH_F_LINKDOWN = 1, 16
RTM_NEWLINK, RTM_DELLINK = 16, 17  # a link event re-reads the main table
RETRY_S = 1.0  # reconnect to the BFD feed, restart the probe engine
JOIN_BATCH_S = 0.2
READ_BUDGET = 256 << 10  # route events parsed per turn (~2,000): a BFD verdict waits no longer
EVENT_RCVBUF = 8 << 20  # a plane failure on a large lab changes hundreds of routes at once
# The plane tables' routes are the NIC's own: as `kernel` routes zebra drops their news
# unread (rt_netlink.c); as static ones each host's zebra parsed and kept all of them, eight
# per destination: 224 CPU seconds while a 504-node lab converged.
RTPROT_KERNEL = 2

Hops = dict[int, str]  # plane -> gateway


class RouteEvents:
    """A plain rtnetlink socket subscribed to route and link changes, read without parsing
    (see `host_route`)."""

    def __init__(self) -> None:
        self.sock = subscribe(RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE | RTMGRP_LINK, EVENT_RCVBUF)

    def fileno(self) -> int:
        return self.sock.fileno()

    def read(self) -> list[tuple[int, bytes]] | None:
        """(type, body) of the pending messages, up to READ_BUDGET bytes a turn; None if the
        kernel dropped some (the socket overflowed)."""
        messages: list[tuple[int, bytes]] = []
        taken = 0
        while taken < READ_BUDGET:
            try:
                data = self.sock.recv(1 << 20)
            except BlockingIOError:
                return messages
            except OSError as exc:
                if exc.errno == errno.ENOBUFS:
                    return None
                raise
            taken += len(data)
            messages += [(kind, body) for kind, _, body in split(data)]
        return messages  # more may be queued: the loop comes back once BFD has been heard


def host_route(body: bytes, plane_of_index: dict[int, int]) -> tuple[str, Hops] | None:
    """A main-table host route's destination and its live next hops by plane; None for any
    other route (the agent's own plane-table routes are most of them at deploy)."""
    family, dst_len, _, _, rtm_table, _, _, _, flags = RTMSG.unpack_from(body)
    if HOST_LEN.get(family) != dst_len:
        return None
    values = attributes(body, RTMSG.size)
    if table_of(rtm_table, values) != RT_TABLE_MAIN or RTA_DST not in values:
        return None
    hops = {plane: unpack_address(hop.gateway) for hop in next_hops(values, flags)
            if (plane := plane_of_index.get(hop.ifindex)) is not None and hop.gateway
            and not hop.flags & (RTNH_F_DEAD | RTNH_F_LINKDOWN)}
    return socket.inet_ntop(family, values[RTA_DST]), hops


def spray_sets(routes: dict[str, Hops], bfd_down: set[int],
               drained: dict[str, dict[int, str]]) -> dict[str, Hops]:
    """Per destination, the planes to spray over: those zebra has a next hop on, minus those
    whose BFD session is down (the link's one session carries both families) and those the
    probes drained towards it. A destination with no plane left is dropped: the host has no
    path to it, and must not pretend."""
    wanted = {}
    for dst, hops in routes.items():
        out = drained.get(dst, {})
        alive = {p: gw for p, gw in hops.items() if p not in bfd_down and p not in out}
        if alive:
            wanted[dst] = alive
    return wanted


class Sprayer:
    def __init__(self, nic_planes: dict[str, int], state_file: Path,
                 bfd_feed: dict[str, str], probe: dict[str, Any] | None) -> None:
        self.nic_planes = nic_planes
        self.state_file = state_file
        self.bfd_feed = bfd_feed  # {"engine": path} (the BFD offload's feed) or {"bfdd": path}
        self.bfd: BfdWatch | EngineWatch | None = None
        self.bfd_down: set[int] = set()  # planes whose BFD session is not up
        self.probe_config = probe  # {"argv": engine argv, "peers": {peer: its addresses}}
        self.probe: ProbeEngine | None = None
        self.drained: dict[str, dict[int, str]] = {}  # address -> {plane: why the probes say}
        self.everywhere: dict[int, str] = {}  # planes the probes drained towards every address
        self.channel = Channel()  # plane-table routes, many per send
        self.nft = Nft()
        self.events = RouteEvents()
        self.plane_of_index: dict[int, int] = {}
        self.routes: dict[str, Hops] = {}  # what the main table offers
        self.wanted: dict[str, Hops] = {}  # minus planes BFD or the probes took out
        self.installed: dict[str, Hops] = {}  # what nft sprays over
        self.tables: dict[str, Hops] = {}  # what the plane tables route (probes use them all)
        self.changes = 0
        self.last_reaction_ms: float | None = None
        # dst -> (event, nft switch) on CLOCK_MONOTONIC, which every namespace shares: a test
        # lines these up with the moment it injected a fault.
        self.switched_ns: dict[str, tuple[int, int]] = {}

    # -- reading what zebra installed --------------------------------------------------------

    def resync(self) -> None:
        self.plane_of_index = {index: self.nic_planes[name] for index, name in
                               socket.if_nameindex() if name in self.nic_planes}
        routes = {}
        with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) as sock:
            for _, body in dump_routes(sock):
                route = host_route(body, self.plane_of_index)
                if route is not None and route[1]:
                    routes[route[0]] = route[1]
        self.routes = routes

    def on_event(self, kind: int, body: bytes) -> None:
        if kind in (RTM_NEWLINK, RTM_DELLINK):
            self.resync()
            return
        if kind not in (RTM_NEWROUTE, RTM_DELROUTE):
            return
        route = host_route(body, self.plane_of_index)
        if route is None:
            return
        dst, hops = route
        if hops and kind == RTM_NEWROUTE:
            self.routes[dst] = hops
        else:
            self.routes.pop(dst, None)

    def _connect_bfd(self) -> None:
        try:
            (kind, path), = self.bfd_feed.items()
            self.bfd = EngineWatch(path) if kind == "engine" else BfdWatch(path)
        except OSError:
            self.bfd = None  # not (yet) running: retried every RETRY_S

    def on_bfd(self) -> None:
        assert self.bfd is not None
        states = self.bfd.read()
        if states is None:  # bfdd went away: its verdicts go with it
            self.bfd, self.bfd_down = None, set()
            return
        for state in states:
            plane = self.nic_planes.get(state.nic)
            if plane is None:
                continue
            if state.up:
                self.bfd_down.discard(plane)
            else:
                self.bfd_down.add(plane)

    def _start_probe(self) -> None:
        assert self.probe_config is not None
        self.probe = ProbeEngine(self.probe_config["argv"])

    def on_probe(self) -> None:
        assert self.probe is not None and self.probe_config is not None
        verdicts = self.probe.read()
        if verdicts is None:  # the engine died: its verdicts go with it (restarted shortly)
            self.probe, self.drained, self.everywhere = None, {}, {}
            return
        for verdict in verdicts:
            concerned = [self.everywhere] if verdict.peer == EVERY_PEER else [
                self.drained.setdefault(address, {})
                for address in self.probe_config["peers"].get(verdict.peer, ())]
            for planes in concerned:
                if verdict.reason is None:
                    planes.pop(verdict.plane, None)
                else:
                    planes[verdict.plane] = verdict.reason

    # -- programming the kernel ---------------------------------------------------------------

    def install_rules(self) -> None:
        """Policy rules per plane, and empty plane tables (a restarted agent starts clean)."""
        planes = sorted(set(self.nic_planes.values()))
        # iproute2 flushes in C (a dump through Python would cost a host of fpf-64 seconds);
        # rules are deleted, any an earlier agent left, then added
        for family in ("-4", "-6"):
            rules = [f"fwmark {plane_mark(p)} table {plane_table(p)} pref {RULE_PREF_BASE + p}"
                     for p in planes]
            ip_batch(family, [f"route flush table {plane_table(p)}" for p in planes])
            ip_batch(family, [f"rule del {rule}" for rule in rules], check=False)
            ip_batch(family, [f"rule add {rule}" for rule in rules])

    def _send_routes(self, msg_type: int, routes: list[tuple[str, int, str]]) -> None:
        """Replace or delete plane-table routes (dst, plane, gateway), all in a few sends:
        pyroute2 costs a millisecond each, and a host of fpf-64 installs ~1800 at deploy."""
        nics = {p: i for i, p in self.plane_of_index.items()}
        flags = NLM_F_REPLACE | NLM_F_CREATE if msg_type == RTM_NEWROUTE else 0
        first = self.channel.reserve(len(routes))
        messages = [route_message(msg_type, flags, first + n, (packed := ip_address(dst).packed),
                                  len(packed) * 8, plane_table(plane),
                                  RTPROT_KERNEL, oif=nics[plane],
                                  gateway=ip_address(gateway).packed)
                    for n, (dst, plane, gateway) in enumerate(routes)]
        for (dst, plane, _), code in zip(routes, self.channel.request_many(messages, first),
                                         strict=True):
            if code and not (msg_type == RTM_DELROUTE and code == errno.ESRCH):
                raise OSError(code, f"plane {plane} route to {dst}: {os.strerror(code)}")

    def losing(self) -> bool:
        """Whether `wanted` takes a plane away from some destination (or drops one)."""
        return any(not hops.keys() <= self.wanted.get(dst, {}).keys()
                   for dst, hops in self.installed.items())

    def apply(self, started: float) -> None:
        """Make the kernel match: each plane table routes a destination over its plane while
        zebra has a next hop there (the probes need a drained plane's route to see it heal),
        and nft sprays over `wanted`. Routes are added before nft switches and removed after,
        so a packet is never marked for a plane whose table cannot route it."""
        before = {dst: frozenset(h) for dst, h in self.installed.items()}
        after = {dst: frozenset(h) for dst, h in self.wanted.items()}
        self._send_routes(RTM_NEWROUTE, [
            (dst, plane, gateway) for dst, hops in self.routes.items()
            for plane, gateway in hops.items()
            if self.tables.get(dst, {}).get(plane) != gateway])
        if before != after:
            self.nft.run(nft_ruleset(self.wanted))
        switched = time.monotonic()
        switched_ms = (switched - started) * 1000
        self._send_routes(RTM_DELROUTE, [
            (dst, plane, gateway) for dst, hops in self.tables.items()
            for plane, gateway in hops.items() if plane not in self.routes.get(dst, {})])
        routed, self.tables = self.tables, {dst: dict(h) for dst, h in self.routes.items()}
        if before == after and self.installed == self.wanted:
            if routed != self.tables:
                self.write_state()  # `inspect` tells a route gone from a drained plane
            return
        reaction_ms = (time.monotonic() - started) * 1000
        for dst in sorted(before.keys() | after.keys()):
            if before.get(dst) != after.get(dst):
                self.switched_ns[dst] = (int(started * 1e9), int(switched * 1e9))
                print(f"{time.time():.3f} {dst}: planes {sorted(before.get(dst, ()))} -> "
                      f"{sorted(after.get(dst, ()))} (sprayed {switched_ms:.1f} ms, settled "
                      f"{reaction_ms:.1f} ms after the event)",
                      flush=True)
        self.installed = {dst: dict(h) for dst, h in self.wanted.items()}
        self.changes += 1
        self.last_reaction_ms = switched_ms
        self.write_state()

    def write_state(self) -> None:
        state = {"pid": os.getpid(), "updated": time.time(), "changes": self.changes,
                 "bfd_down": sorted(self.bfd_down),
                 "drained": {dst: planes for dst, planes in sorted(self.probe_drained().items())
                             if planes},
                 "last_reaction_ms": self.last_reaction_ms, "nics": self.nic_planes,
                 "switched_ns": self.switched_ns,
                 "spray": {dst: sorted(h) for dst, h in sorted(self.installed.items())},
                 "routes": {dst: sorted(h) for dst, h in sorted(self.routes.items())}}
        replace_file(self.state_file, json.dumps(state))  # no indent: json.dumps stays in C

    # -- the loop -----------------------------------------------------------------------------

    def run(self) -> None:
        self.install_rules()
        self._connect_bfd()
        if self.probe_config:
            self._start_probe()
        self.resync()
        self.wanted = self._wanted()
        self.apply(time.monotonic())
        self.write_state()
        joining: float | None = None  # when the first batched join arrived
        while True:
            verdicts = [v for v in (self.bfd, self.probe) if v is not None]
            missing = self.bfd is None or (self.probe_config is not None and self.probe is None)
            waits = [*([RETRY_S] if missing else []),
                     *([] if joining is None else [joining + JOIN_BATCH_S - time.monotonic()])]
            ready, _, _ = select.select([self.events, *verdicts], [], [],
                                        max(0.0, min(waits)) if waits else None)
            started = time.monotonic()
            if self.bfd is None:
                self._connect_bfd()
            if self.probe_config and self.probe is None:
                self._start_probe()
            if any(v in ready for v in verdicts):  # first: a dead plane cannot wait
                if self.bfd in ready:
                    self.on_bfd()
                if self.probe in ready:
                    self.on_probe()
                self.wanted = self._wanted()
                if self.losing():
                    self.apply(started)
            if self.events in ready:
                messages = self.events.read()
                if messages is None:
                    self.resync()  # events were lost: the table itself is the truth
                for kind, body in messages or ():
                    self.on_event(kind, body)
            self.wanted = self._wanted()
            if self.losing() or (joining is not None and started >= joining + JOIN_BATCH_S):
                self.apply(started if joining is None else joining)
                joining = None
            elif joining is None and (self.wanted, self.routes) != (self.installed, self.tables):
                joining = started

    def _wanted(self) -> dict[str, Hops]:
        return spray_sets(self.routes, self.bfd_down, self.probe_drained())

    def probe_drained(self) -> dict[str, dict[int, str]]:
        """Per destination, the planes the probes took out: towards it, or towards all."""
        if not self.everywhere:
            return self.drained
        return {dst: {**self.everywhere, **self.drained.get(dst, {})}
                for dst in self.routes.keys() | self.drained.keys()}


def ip_batch(family: str, commands: list[str], *, check: bool = True) -> None:
    """iproute2 commands in one `ip -batch`; unchecked ones run on past a failure."""
    subprocess.run(["ip", family, *(() if check else ("-force",)), "-batch", "-"],
                   input="".join(f"{c}\n" for c in commands), text=True, check=check,
                   capture_output=True)


def main(argv: list[str]) -> int:
    config = json.loads(Path(argv[0]).read_text())
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    Sprayer(config["nics"], Path(config["state_file"]), config["bfd"], config.get("probe")).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
