"""The spray agent: one per multi-plane host, running inside the host's namespace.

It learns what zebra installs by listening to rtnetlink route events (no polling): a route to
a host prefix in the main table names, through its next hops, the planes a destination is
reachable on. When BFD or BGP drops a plane, bgpd withdraws, zebra replaces the route without
that plane's next hop, and the event reaches this agent, which rewrites the spray set within
milliseconds; when the plane returns, so does the next hop and the plane is sprayed again.
A failure that hits only some destinations (a leaf uplink) removes the plane only for them.

Nexthop-object and link events can change next hops without a route event, so they trigger
a full re-read of the main table. State is written to a JSON file for `inspect` and tests.

Usage (started by harness.spray.control at deploy): python -m harness.spray.agent CONFIG.json
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pyroute2 import IPRoute
from pyroute2.netlink.rtnl import RTMGRP_IPV4_ROUTE, RTMGRP_IPV6_ROUTE, RTMGRP_LINK

from harness.spray.ruleset import (
    RULE_PREF_BASE,
    nft_ruleset,
    plane_mark,
    plane_table,
)

RT_TABLE_MAIN = 254
RTNLGRP_NEXTHOP = 32
RTNH_F_DEAD, RTNH_F_LINKDOWN = 1, 16
HOST_PREFIX = {2: 32, 10: 128}  # AF_INET, AF_INET6
BATCH_QUIET_S = 0.002  # events closer than this are applied together (one nft transaction)
RESYNC_EVENTS = {"RTM_NEWNEXTHOP", "RTM_DELNEXTHOP", "RTM_NEWLINK", "RTM_DELLINK"}
RTM_NEWNEXTHOP, RTM_DELNEXTHOP = 104, 105  # pyroute2 leaves these unnamed on some versions

Hops = dict[int, str]  # plane -> gateway


class Sprayer:
    def __init__(self, nic_planes: dict[str, int], state_file: Path) -> None:
        self.nic_planes = nic_planes
        self.state_file = state_file
        self.ip = IPRoute()
        self.events = IPRoute()
        self.events.bind(groups=RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE | RTMGRP_LINK
                         | 1 << (RTNLGRP_NEXTHOP - 1))
        self.plane_of_index: dict[int, int] = {}
        self.wanted: dict[str, Hops] = {}
        self.installed: dict[str, Hops] = {}
        self.changes = 0
        self.last_reaction_ms: float | None = None

    # -- reading what zebra installed --------------------------------------------------------

    def _map_interfaces(self) -> None:
        self.plane_of_index = {}
        for link in self.ip.get_links():
            name = link.get_attr("IFLA_IFNAME")
            if name in self.nic_planes:
                self.plane_of_index[link["index"]] = self.nic_planes[name]

    def _hops(self, route: Any) -> Hops:
        multipath = route.get_attr("RTA_MULTIPATH")
        entries = multipath or [route]
        hops: Hops = {}
        for nh in entries:
            oif = nh["oif"] if multipath else route.get_attr("RTA_OIF")
            plane = self.plane_of_index.get(oif)
            gateway = nh.get_attr("RTA_GATEWAY")
            if plane is None or gateway is None or nh["flags"] & (RTNH_F_DEAD | RTNH_F_LINKDOWN):
                continue
            hops[plane] = gateway
        return hops

    @staticmethod
    def _host_route(msg: Any) -> str | None:
        """The destination of a main-table host route, or None for any other route."""
        table = msg.get_attr("RTA_TABLE") or msg["table"]
        if table != RT_TABLE_MAIN or msg["dst_len"] != HOST_PREFIX.get(msg["family"]):
            return None
        return msg.get_attr("RTA_DST")

    def resync(self) -> None:
        self._map_interfaces()
        wanted = {}
        for family in HOST_PREFIX:
            for route in self.ip.get_routes(family=family, table=RT_TABLE_MAIN):
                dst = self._host_route(route)
                if dst is not None and (hops := self._hops(route)):
                    wanted[dst] = hops
        self.wanted = wanted

    def on_event(self, msg: Any) -> None:
        event = msg.get("event")
        if event in RESYNC_EVENTS or msg["header"]["type"] in (RTM_NEWNEXTHOP, RTM_DELNEXTHOP):
            self.resync()
            return
        if event not in ("RTM_NEWROUTE", "RTM_DELROUTE"):
            return
        dst = self._host_route(msg)
        if dst is None:
            return
        hops = self._hops(msg) if event == "RTM_NEWROUTE" else {}
        if hops:
            self.wanted[dst] = hops
        else:
            self.wanted.pop(dst, None)

    # -- programming the kernel ---------------------------------------------------------------

    def install_rules(self) -> None:
        planes = sorted(set(self.nic_planes.values()))
        for family in HOST_PREFIX:
            for plane in planes:
                rule = {"family": family, "fwmark": plane_mark(plane), "table": plane_table(plane),
                        "priority": RULE_PREF_BASE + plane}
                if not self.ip.get_rules(**rule):
                    self.ip.rule("add", **rule)

    def _set_plane_route(self, op: str, dst: str, plane: int, gateway: str) -> None:
        nic = next(i for i, p in self.plane_of_index.items() if p == plane)
        family = 10 if ":" in dst else 2
        self.ip.route(op, dst=dst, dst_len=HOST_PREFIX[family], family=family, gateway=gateway,
                      oif=nic, table=plane_table(plane))

    def apply(self, started: float) -> None:
        """Make the kernel match `wanted`: add routes, then switch nft, then remove routes, so
        a packet is never marked for a plane whose table cannot route it."""
        before = {dst: frozenset(h) for dst, h in self.installed.items()}
        after = {dst: frozenset(h) for dst, h in self.wanted.items()}
        for dst, hops in self.wanted.items():
            for plane, gateway in hops.items():
                if self.installed.get(dst, {}).get(plane) != gateway:
                    self._set_plane_route("replace", dst, plane, gateway)
        if before != after:
            subprocess.run(["nft", "-f", "-"], input=nft_ruleset(self.wanted), text=True,
                           check=True)
        for dst, hops in self.installed.items():
            for plane, gateway in hops.items():
                if plane not in self.wanted.get(dst, {}):
                    self._set_plane_route("del", dst, plane, gateway)
        if before == after and self.installed == self.wanted:
            return
        reaction_ms = (time.monotonic() - started) * 1000
        for dst in sorted(before.keys() | after.keys()):
            if before.get(dst) != after.get(dst):
                print(f"{time.time():.3f} {dst}: planes {sorted(before.get(dst, ()))} -> "
                      f"{sorted(after.get(dst, ()))} ({reaction_ms:.1f} ms after the event)",
                      flush=True)
        self.installed = {dst: dict(h) for dst, h in self.wanted.items()}
        self.changes += 1
        self.last_reaction_ms = reaction_ms
        self.write_state()

    def write_state(self) -> None:
        state = {"pid": os.getpid(), "updated": time.time(), "changes": self.changes,
                 "last_reaction_ms": self.last_reaction_ms, "nics": self.nic_planes,
                 "spray": {dst: sorted(h) for dst, h in sorted(self.installed.items())}}
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        os.replace(tmp, self.state_file)

    # -- the loop -----------------------------------------------------------------------------

    def run(self) -> None:
        self.install_rules()
        self.resync()
        self.apply(time.monotonic())
        self.write_state()
        while True:
            messages = self.events.get()
            started = time.monotonic()
            while True:
                for msg in messages:
                    self.on_event(msg)
                ready, _, _ = select.select([self.events.fileno()], [], [], BATCH_QUIET_S)
                if not ready:
                    break
                messages = self.events.get()
            self.apply(started)


def main(argv: list[str]) -> int:
    config = json.loads(Path(argv[0]).read_text())
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    Sprayer(config["nics"], Path(config["state_file"])).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
