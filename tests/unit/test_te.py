"""The SRv6 TE headend (harness/nodes/switch/agent/te.py) without a switch: its probe packet
dissected by scapy, and its judgement of paths and steering of routes driven through a fake
clock, a fake route orchestrator and real datagram sockets for the probes coming back."""

from __future__ import annotations

import json
import socket
from ipaddress import IPv6Address
from pathlib import Path

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrSegmentRouting

from harness.nodes.switch.agent import te
from harness.nodes.switch.sai.status import Status
from harness.nodes.switch.sai.types import IpPrefix

SOURCE = IPv6Address("fd00:0:0:1::1")
INTERVAL_US, MISSES, UP = 15_625, 3, 4  # 1/64 s: the fake clock's sums are exact
HOLD_DOWN_US = 8 * INTERVAL_US


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Routes:
    """RouteOrch's side TeOrch uses: what zebra wants, pin and unpin."""

    def __init__(self) -> None:
        self.wanted: dict[IpPrefix, object] = {}
        self.pinned: dict[IpPrefix, int] = {}
        self.refuse: set[IpPrefix] = set()

    def pin(self, prefix: IpPrefix, attrs: dict[str, int]) -> Status:
        if prefix in self.refuse:
            return Status.TABLE_FULL
        self.pinned[prefix] = attrs["SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID"]
        return Status.SUCCESS

    def unpin(self, prefix: IpPrefix) -> None:
        del self.pinned[prefix]


class Sender:
    """The raw socket's side TeOrch uses: probes kept, never sent."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def sendto(self, packet: bytes, _to: tuple[str, int]) -> None:
        self.sent.append(packet)


class Config:
    def __init__(self) -> None:
        self.refs = {"NEXT_HOP|primary": 0x4001, "NEXT_HOP|fallback": 0x4002}


def document(tmp_path: Path, policies: int = 1) -> Path:
    path = tmp_path / "te-policies.json"
    path.write_text(json.dumps({"source": str(SOURCE), "policies": [
        {"name": f"p{i}", "prefix": f"fd00:100:{i + 2}::/64", "probe_interval_us": INTERVAL_US,
         "probe_misses": MISSES, "probe_up": UP, "hold_down_us": HOLD_DOWN_US, "paths": [
             {"next_hop": "NEXT_HOP|primary", "hops": ["bb1", "bb2", "bb3"],
              "probe": ["fcbb:bbbb:2:1002::", "fcbb:bbbb:3:d6::"]},
             {"next_hop": "NEXT_HOP|fallback", "hops": ["bb1", "bb4", "bb3"],
              "probe": ["fcbb:bbbb:4:1003::", "fcbb:bbbb:3:d6::"]}]}
        for i in range(policies)]}))
    return path


@pytest.fixture
def headend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
            ) -> tuple[te.TeOrch, Routes, Clock, socket.socket]:
    """A headend with one policy, its probes sent nowhere and answered through `back`."""
    clock = Clock()
    monkeypatch.setattr(te.time, "monotonic", clock)
    routes = Routes()
    orch = te.TeOrch(Config(), routes)  # type: ignore[arg-type]
    orch.load(document(tmp_path))
    back, orch.receiver = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    orch.receiver.setblocking(False)
    orch.sender = Sender()  # type: ignore[assignment]
    orch.tick()  # the first probes go out
    return orch, routes, clock, back


def answer(back: socket.socket, path: int, policy: int = 0, magic: int = te.MAGIC,
           sequence: int = 1) -> None:
    back.send(te._PROBE.pack(magic, policy, path, sequence, 0))


def interval(orch: te.TeOrch, clock: Clock, back: socket.socket, paths: list[int]) -> None:
    """One probe interval in which the last probes of `paths` come back, read by the tick
    that ends it (the tick reads the socket before it judges)."""
    for path in paths:
        answer(back, path, sequence=orch.policies[0].paths[path].sent)
    clock.now += INTERVAL_US / 1e6
    orch.tick()


def up_both(orch: te.TeOrch, clock: Clock, back: socket.socket) -> None:
    for _ in range(UP):
        interval(orch, clock, back, [0, 1])
    assert [p.up for p in orch.policies[0].paths] == [True, True]


PREFIX = IpPrefix.parse("fd00:100:2::/64")


def test_a_probe_is_an_srh_encapsulated_packet_that_comes_home() -> None:
    segments = [IPv6Address("fcbb:bbbb:2:1002::"), IPv6Address("fcbb:bbbb:3:d6::")]
    payload = te._PROBE.pack(te.MAGIC, 0, 1, 7, 123)
    outer = IPv6(te.probe_packet(SOURCE, segments, payload))
    assert (outer.src, outer.dst) == (str(SOURCE), str(segments[0]))
    srh = outer[IPv6ExtHdrSegmentRouting]
    assert srh.addresses == [str(s) for s in reversed(segments)]  # the SRH lists them last first
    assert srh.segleft == srh.lastentry == len(segments) - 1
    inner = srh.payload
    assert isinstance(inner, IPv6) and inner.src == inner.dst == str(SOURCE)
    udp = inner[UDP]
    assert udp.sport == udp.dport == te.PROBE_PORT and bytes(udp.payload) == payload
    again = IPv6(bytes(inner))
    del again[UDP].chksum
    assert IPv6(bytes(again))[UDP].chksum == udp.chksum, "scapy computes the same checksum"


def test_within_is_containment_in_one_family() -> None:
    assert te.within(IpPrefix.parse("fd00:100:2::5/128"), PREFIX)
    assert te.within(PREFIX, PREFIX)
    assert not te.within(IpPrefix.parse("fd00:100:3::5/128"), PREFIX)
    assert not te.within(IpPrefix.parse("fd00:100::/48"), PREFIX), "less specific"
    assert not te.within(IpPrefix.parse("10.0.0.0/8"), IpPrefix.parse("::/0"))


def test_loading_steers_to_the_first_path_before_any_probe(headend) -> None:
    orch, routes, _, _ = headend
    assert routes.pinned == {PREFIX: 0x4001}
    [policy] = orch.policies
    assert policy.active == 0 and policy.switches[-1]["why"] == "loaded"
    assert not any(p.up for p in policy.paths)


def test_a_path_is_up_after_up_probes_in_a_row(headend) -> None:
    orch, _, clock, back = headend
    [policy] = orch.policies
    for k in range(UP):
        assert not policy.paths[1].up, f"up after {k} probes back"
        interval(orch, clock, back, [1])
    assert policy.paths[1].up and not policy.paths[0].up
    assert policy.active == 1, "the first path that is up carries the routes"


def test_a_silent_path_is_down_after_misses_ticks_and_returns_after_the_hold_down(
        headend) -> None:
    orch, routes, clock, back = headend
    [policy] = orch.policies
    up_both(orch, clock, back)
    assert policy.active == 0 and routes.pinned[PREFIX] == 0x4001
    for k in range(MISSES - 1):  # the primary goes silent
        interval(orch, clock, back, [1])
        assert policy.active == 0, f"moved after {k + 1} ticks with none back"
    interval(orch, clock, back, [1])
    assert not policy.paths[0].up and policy.active == 1
    assert routes.pinned[PREFIX] == 0x4002 and policy.switches[-1]["why"] == "probes"
    down_at = clock.now
    for _ in range(UP):  # back at once, but held down
        interval(orch, clock, back, [0, 1])
    assert policy.paths[0].in_a_row == UP and policy.active == 1
    while clock.now - down_at < HOLD_DOWN_US / 1e6:
        assert policy.active == 1, "returned inside the hold-down"
        interval(orch, clock, back, [0, 1])
    assert policy.active == 0 and routes.pinned[PREFIX] == 0x4001, "revertive after it"
    assert [s["to"] for s in policy.switches] == [0, 1, 0]
    assert orch.status()[0]["moves"] == 2 and orch.status()[0]["paths"][0]["downs"] == 1


def test_a_path_that_answers_every_other_probe_stays_down(headend) -> None:
    orch, _, clock, back = headend
    [policy] = orch.policies
    for k in range(20 * UP):
        interval(orch, clock, back, [1] if k % 2 else [0, 1])
    assert not policy.paths[0].up and policy.paths[0].received == 10 * UP
    assert policy.active == 1


def test_a_path_that_is_up_stays_up_through_single_losses(headend) -> None:
    """Down takes `misses` ticks in a row with none back; isolated losses never add up."""
    orch, _, clock, back = headend
    [policy] = orch.policies
    up_both(orch, clock, back)
    for k in range(10 * MISSES):
        interval(orch, clock, back, [1] if k % MISSES == 0 else [0, 1])
    assert policy.paths[0].up and policy.active == 0 and policy.paths[0].downs == 0


def test_a_headend_that_woke_late_reads_its_probes_before_judging(headend) -> None:
    """Asleep for many intervals: its probes sat in the socket, and only ticks count as
    misses, so the path is not blamed for the headend's own sleep."""
    orch, _, clock, back = headend
    [policy] = orch.policies
    up_both(orch, clock, back)
    answer(back, 0, sequence=policy.paths[0].sent)
    answer(back, 1, sequence=policy.paths[1].sent)
    clock.now += 10 * MISSES * INTERVAL_US / 1e6
    orch.tick()
    assert [p.up for p in policy.paths] == [True, True] and policy.active == 0
    assert policy.switches[-1]["why"] == "loaded"


def test_probes_that_come_back_late_but_in_order_keep_a_path_up(headend) -> None:
    """A round trip of two intervals under load: each tick still sees one probe back."""
    orch, _, clock, back = headend
    [policy] = orch.policies
    up_both(orch, clock, back)
    for _ in range(5 * MISSES):
        answer(back, 0, sequence=policy.paths[0].sent - 1)
        answer(back, 1, sequence=policy.paths[1].sent)
        clock.now += INTERVAL_US / 1e6
        orch.tick()
    assert policy.paths[0].up and policy.paths[0].downs == 0


def test_with_every_path_broken_the_routes_stay_where_they_are(headend) -> None:
    orch, routes, clock, back = headend
    [policy] = orch.policies
    for _ in range(UP):
        interval(orch, clock, back, [1])
    assert policy.active == 1
    for _ in range(2 * MISSES):
        interval(orch, clock, back, [])
    assert not any(p.up for p in policy.paths)
    assert policy.active == 1 and routes.pinned[PREFIX] == 0x4002


def test_probes_of_no_policy_or_path_are_ignored(headend) -> None:
    orch, _, _, back = headend
    answer(back, 0, magic=0xDEAD)
    answer(back, 2)
    answer(back, 0, policy=1)
    back.send(b"short")
    orch.receive()
    assert [p.received for p in orch.policies[0].paths] == [0, 0]


def test_routes_zebra_brings_inside_the_prefix_follow_the_policy(headend) -> None:
    orch, routes, _, _ = headend
    host = IpPrefix.parse("fd00:100:2::7/128")
    outside = IpPrefix.parse("fd00:100:9::7/128")
    routes.wanted |= {host: object(), outside: object()}
    orch.cover()
    assert routes.pinned == {PREFIX: 0x4001, host: 0x4001}
    assert orch.policies[0].steered == {PREFIX, host}


def test_a_refused_pin_keeps_the_policy_on_its_path(headend) -> None:
    orch, routes, clock, back = headend
    [policy] = orch.policies
    routes.refuse = {PREFIX}
    for _ in range(UP):
        interval(orch, clock, back, [1])
    assert policy.paths[1].up and policy.active == 0, "not moved where the switch refused"
    routes.refuse = set()
    interval(orch, clock, back, [1])
    assert policy.active == 1 and routes.pinned[PREFIX] == 0x4002


def test_reloading_without_a_policy_hands_its_routes_back(headend, tmp_path: Path) -> None:
    orch, routes, _, _ = headend
    empty = tmp_path / "none.json"
    empty.write_text(json.dumps({"source": str(SOURCE), "policies": []}))
    orch.load(empty)
    assert routes.pinned == {} and orch.policies == []
    assert orch.next_due == float("inf")
    orch.load(tmp_path / "missing.json")
    assert orch.policies == [], "no document: no policies"


def test_a_route_zebra_brings_is_claimed_onto_the_active_path(headend) -> None:
    orch, routes, clock, back = headend
    [policy] = orch.policies
    for _ in range(UP):
        interval(orch, clock, back, [1])
    host = IpPrefix.parse("fd00:100:2::9/128")
    assert orch.claim(host) and routes.pinned[host] == 0x4002 and host in policy.steered
    assert not orch.claim(IpPrefix.parse("fd00:100:9::9/128")), "no policy holds it"
