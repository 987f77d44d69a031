"""fl-probe (harness/spray/fl_probe.c) alone, driven with crafted probes: the engine runs in a
scratch namespace with three planes (veths), and this test plays its peer host, sending
numbered rounds on chosen planes. The engine judges when probes arrive, so each threshold is
checked one round short of it and at it: a plane is silent once MISSES newer rounds came on
another plane, lossy once it lost DRAIN more of the window than the typical plane, and
drained towards every peer once the peers lost 2 x DRAIN more of its probes."""

from __future__ import annotations

import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.core.build import built
from harness.core.wait import none_left, wait_until
from harness.linux.nsenter import NETNS_RUN_DIR, call_in_netns
from harness.linux.scratch import scratch_netns
from harness.spray.probe import ENGINE

pytestmark = pytest.mark.e2e

PORT, MISSES, WINDOW, DRAIN = 7777, 3, 10, 2
ENGINE_ADDR, PEER_ADDR = "10.77.0.1", "10.77.0.2"
PLANES = 3
MAGIC = 0x464C5052
PROBE = struct.Struct("!IBBHIII32s")  # struct probe, packed, network order
SETTLE_S = 0.05


def ip(netns: str, *argv: str) -> None:
    subprocess.run(["ip", "-n", netns, *argv], check=True, capture_output=True)


class Peer:
    """The engine's one peer: a socket per plane, each bound to that plane's veth."""

    def __init__(self, netns: str, engine_netns: str, log: Path, out: Path) -> None:
        self.engine_netns, self.log, self.out, self.epoch = engine_netns, log, out, 7
        self.socks = [call_in_netns(f"{NETNS_RUN_DIR}/{netns}", self._socket(i))
                      for i in range(PLANES)]

    @staticmethod
    def _socket(plane: int):
        def make() -> socket.socket:
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, f"q{plane}".encode())
            sock.bind((PEER_ADDR, 0))
            return sock
        return make

    def round(self, number: int, planes: tuple[int, ...] = (0, 1, 2),
              lost: dict[int, int] | None = None) -> None:
        """Round `number` on `planes`, saying how many of the engine's probes this peer lost
        per plane; returns once the engine has read them."""
        counts = bytearray(32)
        for plane, n in (lost or {}).items():
            counts[plane] = n
        for plane in planes:
            self.socks[plane].sendto(PROBE.pack(MAGIC, 1, plane, self.epoch, number, 0, 0,
                                                bytes(counts)), (ENGINE_ADDR, PORT))
        wait_until(self.queued, 2, every=0.005, until=none_left)
        time.sleep(SETTLE_S)  # the verdicts follow the read at once

    def queued(self) -> int:
        out = subprocess.run(["ip", "netns", "exec", self.engine_netns, "ss", "-Hun",
                              "sport", f"= :{PORT}"], capture_output=True, text=True).stdout
        return sum(int(line.split()[1]) for line in out.splitlines() if line.strip())

    def verdicts(self) -> list[str]:
        """The engine's own verdicts on this peer's planes, in order: 'plane 1: ok -> silent'."""
        return [line.split(f"from {PEER_ADDR} ", 1)[1].split(" (")[0]
                for line in self.log.read_text().splitlines() if f"from {PEER_ADDR} " in line]

    def drained(self) -> list[str]:
        return self.out.read_text().splitlines()


@pytest.fixture
def peer(tmp_path: Path) -> Iterator[Peer]:
    with scratch_netns("probe-engine") as engine, scratch_netns("probe-peer") as far:
        for plane in range(PLANES):
            ip(engine, "link", "add", f"p{plane}", "type", "veth", "peer", "name", f"q{plane}",
               "netns", far)
            ip(engine, "link", "set", f"p{plane}", "up")
            ip(far, "link", "set", f"q{plane}", "up")
        ip(engine, "link", "set", "lo", "up")
        ip(far, "link", "set", "lo", "up")
        ip(engine, "addr", "add", f"{ENGINE_ADDR}/32", "dev", "lo")
        ip(far, "addr", "add", f"{PEER_ADDR}/32", "dev", "lo")
        for plane in range(PLANES):
            mac = subprocess.run(["ip", "-n", engine, "-br", "link", "show", f"p{plane}"],
                                 capture_output=True, text=True).stdout.split()[2]
            ip(far, "route", "add", f"{ENGINE_ADDR}/32", "dev", f"q{plane}", "metric",
               str(plane + 1))
            ip(far, "neigh", "add", ENGINE_ADDR, "lladdr", mac, "dev", f"q{plane}", "nud",
               "permanent")
        log, out = tmp_path / "fl-probe.log", tmp_path / "fl-probe.out"
        argv = [str(built(ENGINE)), str(PORT), "1000000", str(MISSES), str(WINDOW), str(DRAIN),
                "0x100", ENGINE_ADDR, *(f"{p}=p{p}" for p in range(PLANES)), "--", PEER_ADDR]
        with open(out, "w") as stdout, open(log, "w") as stderr:
            engine_process = subprocess.Popen(["ip", "netns", "exec", engine, *argv],
                                              stdout=stdout, stderr=stderr)
        try:
            wait_until(lambda: "fl-probe:" in log.read_text(), 5, every=0.02)
            yield Peer(far, engine, log, out)
        finally:
            engine_process.terminate()
            engine_process.wait(timeout=5)


def test_a_plane_is_silent_once_misses_newer_rounds_came_on_another(peer: Peer) -> None:
    for number in range(1, 6):
        peer.round(number)
    assert peer.verdicts() == []
    peer.round(6, planes=(0, 2))
    peer.round(7, planes=(0, 2))
    assert peer.verdicts() == []  # plane 1's last is round 5: two newer rounds
    peer.round(8, planes=(0, 2))
    assert peer.verdicts() == ["plane 1: ok -> silent"]  # three: MISSES


def test_a_plane_is_lossy_at_drain_more_lost_than_the_typical_plane(peer: Peer) -> None:
    for number in range(1, 11):
        peer.round(number, planes=(0, 2) if number in (5, 8) else (0, 1, 2))
    assert peer.verdicts() == []  # round 8 closes with round 11: one loss counted so far
    peer.round(11)
    assert peer.verdicts() == ["plane 1: ok -> loss"]  # two lost, the typical plane none


def test_a_plane_the_peers_lose_twice_drain_of_is_drained_everywhere(peer: Peer) -> None:
    peer.round(1, lost={2: 2 * DRAIN - 1})
    assert peer.drained() == []
    peer.round(2, lost={2: 2 * DRAIN})
    assert peer.drained() == ["* 2 drain loss"]
    peer.round(3, lost={})
    assert peer.drained() == ["* 2 drain loss", "* 2 restore"]
