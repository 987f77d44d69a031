"""Two hosts joined by several planes in scratch namespaces: a multipath fabric whose every
path's loss and delay a test sets, and whose losses the links count, not the transport.

Each plane is one veth pair with addresses of its own (10.78.P.1 and .2), so a path is a
plane; an fl-impair engine on the sender's side of every plane delays and drops the data
(acknowledgements come back unimpaired) and counts what it dropped; a plane given no
impairment (None) is a bare veth, for a test of the transport's own speed. Used by the
transport e2e tests and bench/transport.py.
"""

from __future__ import annotations

import itertools
import json
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from harness.core.build import built
from harness.links.impair import engine as impair_engine
from harness.links.impair.userspace import start_scratch
from harness.linux.nsenter import NETNS_RUN_DIR, run_in
from harness.linux.scratch import remove, scratch_name
from harness.nodes.rdma.engine import ENGINE, Nic, Settings
from harness.topology.plan import Impairment
from harness.traffic.rdma import Action, Run, run

FABRICS = itertools.count()
SENDER, RECEIVER = "a", "b"


class Planes:
    """Parallel links from SENDER to RECEIVER, plane p impaired by `impairments[p]`."""

    def __init__(self, directory: Path, impairments: list[Impairment | None]) -> None:
        self.dir, self.impairments = directory, impairments
        tag = next(FABRICS)
        self.ns = {h: scratch_name(f"m{tag}{h}") for h in (SENDER, RECEIVER)}

    def path(self, host: str) -> str:
        return f"{NETNS_RUN_DIR}/{self.ns[host]}"

    def address(self, host: str, plane: int) -> str:
        return f"10.78.{plane}.{1 if host == SENDER else 2}"

    def mac(self, host: str, plane: int) -> str:
        link = json.loads(subprocess.run(
            ["ip", "-n", self.ns[host], "-j", "link", "show", f"p{plane}"],
            capture_output=True, text=True, check=True).stdout)
        return link[0]["address"]

    def control(self, plane: int) -> Path:
        return self.dir / f"plane{plane}.sock"

    def build(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        for host, name in self.ns.items():
            subprocess.run(["ip", "netns", "add", name], check=True)
            # nothing but the transport crosses a plane (no IPv6 discovery, no ARP), so the
            # links' drop counts are the transport's losses exactly
            run_in(self.path(host), ["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                                     "net.ipv6.conf.default.disable_ipv6=1"])
        for plane in range(len(self.impairments)):
            subprocess.run(["ip", "link", "add", f"p{plane}", "netns", self.ns[SENDER], "type",
                            "veth", "peer", "name", f"p{plane}", "netns", self.ns[RECEIVER]],
                           check=True)
            for host in self.ns:
                run_in(self.path(host), ["ip", "addr", "add",
                                         f"{self.address(host, plane)}/24", "dev", f"p{plane}"])
                run_in(self.path(host), ["ip", "link", "set", f"p{plane}", "up"])
            for host, far in ((SENDER, RECEIVER), (RECEIVER, SENDER)):
                run_in(self.path(host), ["ip", "neigh", "replace", self.address(far, plane),
                                         "lladdr", self.mac(far, plane), "nud", "permanent",
                                         "dev", f"p{plane}"])
        for plane, impairment in enumerate(self.impairments):
            if impairment is not None:
                start_scratch(self.path(SENDER), f"p{plane}", f"flm{plane}", self.control(plane),
                              impairment)

    def destroy(self) -> None:
        remove(list(self.ns.values()))

    def impair(self, plane: int, impairment: Impairment) -> None:
        """A new impairment on the plane's data direction, live (a gray failure: 100 % loss
        on a link that stays up)."""
        impair_engine.set_live(str(self.control(plane)), impairment)

    def lost(self) -> int:
        """Frames the planes' link engines dropped since they started."""
        return sum(impair_engine.stats(str(self.control(p)))["lost"]
                   for p, impairment in enumerate(self.impairments) if impairment is not None)

    def nics(self) -> dict[str, Nic]:
        planes = range(len(self.impairments))
        return {h: Nic(i + 1, tuple(self.address(h, p) for p in planes),
                       tuple(f"p{p}" for p in planes), tuple(0 for _ in planes),
                       tuple(self.address(h, p) for p in planes))
                for i, h in enumerate(self.ns)}

    def rdma(self, settings: Settings, actions: Sequence[Action] = ()) -> Run:
        def popen(host: str, argv: list[str], **kw: object) -> subprocess.Popen:
            return subprocess.Popen(["nsenter", f"--net={self.path(host)}", *argv],
                                    **kw)  # type: ignore[call-overload]
        return run(popen, str(built(ENGINE)), self.nics(), [(SENDER, RECEIVER)], settings,
                   actions)


@contextmanager
def planes(directory: Path, impairments: list[Impairment | None]) -> Iterator[Planes]:
    fabric = Planes(directory, impairments)
    try:
        fabric.build()
        yield fabric
    finally:
        fabric.destroy()
