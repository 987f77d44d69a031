"""BFD offload with real FRR: bfdd hands its sessions to the node's fl-bfd, which runs them
(RFC 5880 timers, counters back to bfdd) and finds a silent peer within the detection time;
with `offload: false` they stay in bfdd's own packet loop."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.core.paths import LAB_NAME_MAX, bfdd_socket
from harness.core.wait import none_left, wait_until
from harness.deploy.lab import Lab, deploy
from harness.faults.injector import Faults
from harness.linux.nsenter import call_in_netns
from harness.nodes.bfd.offload import ENGINE, feed_path, tick_ms
from harness.nodes.columns import lab_status
from harness.nodes.frr import finish_boot
from harness.spray.bfd import BfdState, BfdWatch, EngineWatch
from harness.testing.capture import capture
from harness.testing.footprint import node_process
from harness.testing.load import WakeupLateness
from harness.testing.plugin import RUNTIME
from harness.topology.augment import augment
from harness.topology.loader import load_text
from harness.topology.render import bfd_attachment

pytestmark = pytest.mark.e2e

PAIR = """
name: {name}
bgp:
  bfd: {{interval: 100ms, multiplier: 3, offload: {offload}{echo}}}
topology:
  defaults: {{kind: frr}}
  nodes:
    r1: {{role: {roles[0]}}}
    r2: {{role: {roles[1]}}}
  links:
    - endpoints: ["r1:eth1", "r2:eth1"]
    - endpoints: ["r1:eth2", "r2:eth2"]
"""
ECHO_MS = 50


def pair(name: str, offload: bool, echo: bool = False) -> Iterator[Lab]:
    """r1 and r2 over two links, a BGP session and its BFD session on each (two, so that
    r1's sessions can meet on one schedule); with `echo`, r1 is a host and both links run BFD
    echo."""
    text = PAIR.format(name=name, offload=str(offload).lower(),
                       echo=f", host_echo: {ECHO_MS}ms" if echo else "",
                       roles=("host", "leaf") if echo else ("leaf", "spine"))
    lab = deploy(augment(load_text(text)), runtime=RUNTIME, timeout=60)
    yield lab
    lab.destroy()


@pytest.fixture(scope="module")
def offloaded() -> Iterator[Lab]:
    yield from pair("bfd-offload-longest-name"[:LAB_NAME_MAX], True)  # paths at their longest


@pytest.fixture(scope="module")
def in_bfdd() -> Iterator[Lab]:
    yield from pair("bfdsoft", False)


MIXED = """
name: bfdmixed
bgp:
  bfd: {interval: 100ms, multiplier: 3, offload: true}
topology:
  defaults: {kind: frr}
  nodes:
    r1: {role: leaf}
    r2: {role: spine, bfd: {offload: false, multiplier: 5}}
  links:
    - endpoints: ["r1:eth1", "r2:eth1"]
"""


@pytest.fixture(scope="module")
def mixed() -> Iterator[Lab]:
    """r1's sessions in its fl-bfd at multiplier 3, r2's in its own bfdd at multiplier 5."""
    lab = deploy(augment(load_text(MIXED)), runtime=RUNTIME, timeout=60)
    yield lab
    lab.destroy()


@pytest.fixture(scope="module")
def echoing() -> Iterator[Lab]:
    yield from pair("bfdecho", True, echo=True)


def counters(lab: Lab, node: str) -> list[dict]:
    return json.loads(lab.frr(node).vtysh("show bfd peers counters json"))


def bfd_port_owners(lab: Lab, node: str) -> set[str]:
    """Names of the processes listening on BFD's single-hop port in the node."""
    out = lab.runtime.run(node, ["ss", "-Huapn", "sport", "= :3784"], check=True)
    return {part.split('"')[1] for part in out.stdout.split("users:((")[1:]}


def watch(lab: Lab, node: str) -> BfdWatch:
    """bfdd's control socket: every state change the instant bfdd learns it."""
    return BfdWatch(str(bfdd_socket(lab.plan.name, node)))


def seconds_until_all(bfd: BfdWatch, up: bool, sessions: int, timeout: float) -> float:
    start, seen = time.monotonic(), set()
    while len(seen) < sessions:
        left = start + timeout - time.monotonic()
        if left <= 0 or not select.select([bfd], [], [], left)[0]:
            raise AssertionError(f"{len(seen)} of {sessions} sessions went {up} in {timeout} s")
        seen |= {(s.peer, s.ipv6) for s in bfd.read() or () if s.up == up}
    return time.monotonic() - start


def first_change(bfd: BfdWatch | EngineWatch, up: bool, timeout: float) -> BfdState:
    """The first session state `up` that `bfd` reports within `timeout` s."""
    end = time.monotonic() + timeout
    while (left := end - time.monotonic()) > 0 and select.select([bfd], [], [], left)[0]:
        for state in bfd.read() or ():
            if state.up == up:
                return state
    raise AssertionError(f"no session went {'up' if up else 'down'} in {timeout} s")


def assert_each_session_came_up_once(lab: Lab) -> None:
    """FRR 8.4 resets every BGP session once when its BFD was registered before BGP came up
    (FRRouting/frr#17337); deploy puts the sessions under BFD after, so none was dropped."""
    for node in ("r1", "r2"):
        peers = lab.frr(node).show_json("bgpd", "show bgp neighbors")
        assert len(peers) == 2, peers.keys()  # one per link
        for peer, info in peers.items():
            assert (info["connectionsEstablished"], info["connectionsDropped"]) == (1, 0), \
                f"{node} -> {peer}: {info.get('lastResetDueTo')}"


def test_deploy_brings_each_bgp_session_up_once(offloaded):
    assert_each_session_came_up_once(offloaded)


def test_sessions_run_in_the_engine_at_the_configured_rate(offloaded):
    assert bfd_port_owners(offloaded, "r1") == {ENGINE}  # bfdd opened no packet socket
    seconds_until_all(watch(offloaded, "r1"), True, 2, timeout=10)  # one per link
    before, start = counters(offloaded, "r1"), time.monotonic()
    time.sleep(2.0)
    after, elapsed = counters(offloaded, "r1"), time.monotonic() - start
    for old, new in zip(before, after, strict=True):
        sent = new["control-packet-output"] - old["control-packet-output"]
        received = new["control-packet-input"] - old["control-packet-input"]
        # 100 ms less 0-25% jitter: 10 to 13.3 packets a second each way (one tick of slack)
        for count in (sent, received):
            assert 10 * elapsed - 1 <= count <= 13.4 * elapsed + 1, (old, new)


def engine_wakes_per_second(lab: Lab, node: str, seconds: float) -> float:
    """How often the node's engine slept and woke again (its voluntary context switches)."""
    pid = node_process(lab, node, ENGINE)

    def switches() -> int:
        status = Path(f"/proc/{pid}/status").read_text()
        return int(re.search(r"^voluntary_ctxt_switches:\s+(\d+)", status, re.M).group(1))

    before = switches()
    time.sleep(seconds)
    return (switches() - before) / seconds


def test_the_engine_wakes_once_a_round_of_sends_not_every_tick(offloaded):
    """Sessions that send on the same tick share its jitter draw and keep sending together,
    so once r1's two sessions have met, its engine wakes once per send: at most once in 75%
    of the interval (13.3 a second at 100 ms), where waking on every tick is 40."""
    bfd = offloaded.plan.bfd
    assert bfd is not None
    most = 1000 / (0.75 * bfd.interval_ms)
    seen: list[float] = []

    def too_often() -> list[str]:
        seen.append(engine_wakes_per_second(offloaded, "r1", 2.0))
        return [f"{seen[-1]:.1f} a second"] if seen[-1] > most + 0.5 else []  # a count's 1 in 2 s

    wait_until(too_often, 20, lambda left: AssertionError(
        f"r1's engine wakes more than {most:.1f} times a second: {seen}"), until=none_left)


def test_echo_is_looped_back_and_jittered_as_control_packets_are(echoing):
    """Each of r1's sessions echoes every 50 ms less the RFC's 0-25% jitter: 3 or 4 ticks of
    12.5 ms, 43.75 ms apart on average (sent exactly every 50 ms, two echoes lost in a row
    would leave a gap of exactly the detection time, and the third would race the timer).
    Each comes back through r2's forwarding plane."""
    def echoes() -> list[int]:
        return [c.get("echo-packet-output", 0) for c in counters(echoing, "r1")]

    wait_until(lambda: [] if any(echoes()) else ["no echo sent yet"], 10,
               lambda left: AssertionError(f"r1 sends no echo: {counters(echoing, 'r1')}"),
               until=none_left)
    before, start = counters(echoing, "r1"), time.monotonic()
    time.sleep(4.0)
    after, elapsed = counters(echoing, "r1"), time.monotonic() - start
    sent = [new["echo-packet-output"] - old["echo-packet-output"]
            for old, new in zip(before, after, strict=True)]
    back = [new["echo-packet-input"] - old["echo-packet-input"]
            for old, new in zip(before, after, strict=True)]
    assert all(sent), sent
    for echoed, returned in zip(sent, back, strict=True):
        gap_ms = elapsed * 1000 / echoed
        # all 3 ticks: 37.5 ms; the mean 43.75 ms is known to ~0.7 ms over ~90 gaps, and the
        # engine (real-time priority) wakes late by far less than the 3.75 ms to 47.5 ms;
        # unjittered sends are at least 50 ms apart
        assert 37.5 - 1 <= gap_ms <= 0.95 * ECHO_MS, (sent, f"{gap_ms:.1f} ms apart on average")
        assert echoed - 2 <= returned <= echoed + 2, (sent, back)


def test_a_silent_peer_is_found_within_the_detection_time(offloaded):
    """r2 stops hearing r1 (its BFD packets dropped on the way in): detection after between
    (multiplier - 1) and multiplier intervals of silence, plus at most one engine tick and how
    late this box wakes a sleeper."""
    bfd = offloaded.plan.bfd
    assert bfd is not None
    drop = silence(offloaded, "r2")
    bfd_r2 = watch(offloaded, "r2")
    seconds_until_all(bfd_r2, True, 2, timeout=5)  # the current states come first
    with WakeupLateness() as load:
        offloaded.runtime.run("r2", drop, check=True)
        took_ms = seconds_until_all(bfd_r2, False, 2, timeout=5) * 1000
    offloaded.runtime.run("r2", ["nft", "delete table inet bfdtest"], check=True)
    low = (bfd.multiplier - 1) * bfd.interval_ms - tick_ms(bfd)
    high = bfd.multiplier * bfd.interval_ms + tick_ms(bfd) + load.max_ms
    assert low <= took_ms <= high, f"{took_ms:.0f} ms, lateness {load.max_ms:.1f} ms"
    seconds_until_all(bfd_r2, True, 2, timeout=10)


def test_a_lone_engine_crash_is_mended_without_taking_a_session_down(offloaded):
    """Only r1's fl-bfd is killed, three times. Its supervisor starts another on the same
    connection to bfdd, which resumes the sessions as they were: r2's engine never sees one
    go down, no BGP session drops, r1's feed names both sessions up again (what a host's
    sprayer reconnects to), and inspect says the engine was restarted."""
    bfd = offloaded.plan.bfd
    assert bfd is not None
    r2_feed = EngineWatch(str(feed_path(offloaded.frr("r2").bfd_dir)))  # type: ignore[arg-type]
    before = {node: offloaded.frr(node).bgp_connections() for node in ("r1", "r2")}
    for restart in range(1, 4):
        old = node_process(offloaded, "r1", ENGINE)
        os.kill(old, signal.SIGKILL)

        def resumed(old: int = old, restart: int = restart) -> list[str]:
            try:
                new = node_process(offloaded, "r1", ENGINE)
            except LookupError:
                return ["no engine"]
            log = engine_log(offloaded, "r1")
            return [] if new != old and log.count("resumed 2 session(s) on the connection to "
                                                  "bfdd, 2 up") == restart else ["not yet"]
        wait_until(resumed, 5, lambda left: AssertionError(engine_log(offloaded, "r1")[-1500:]),
        until=none_left)
        # as long as r2 may take to notice a silent r1, and then some
        deadline = time.monotonic() + 2 * bfd.multiplier * bfd.interval_ms / 1000
        while (left := deadline - time.monotonic()) > 0:
            if select.select([r2_feed], [], [], left)[0]:
                downs = [s for s in r2_feed.read() or () if not s.up]
                assert not downs, f"r2 saw r1's sessions go down: {downs}"
    assert {node: offloaded.frr(node).bgp_connections() for node in ("r1", "r2")} == before
    r1_feed = EngineWatch(str(feed_path(offloaded.frr("r1").bfd_dir)))  # type: ignore[arg-type]
    wait_until(lambda: [] if select.select([r1_feed], [], [], 0.2)[0] else ["nothing yet"], 3,
               lambda left: AssertionError("the restarted engine's feed says nothing"),
               until=none_left)
    assert sorted(s.up for s in r1_feed.read() or ()) == [True, True]
    row = next(r for r in lab_status(offloaded) if r["node"] == "r1")
    assert row["bfd"] == "offload restarted 3x (last killed-by-signal-9)", row
    assert row["state"] == "running", row
    sent = counters(offloaded, "r1")[0]["control-packet-output"]
    time.sleep(0.5)
    assert counters(offloaded, "r1")[0]["control-packet-output"] > sent  # the new engine's


def engine_log(lab: Lab, node: str) -> str:
    return (lab.frr(node).log_dir / f"{ENGINE}.log").read_text()


def silence(lab: Lab, node: str) -> list[str]:
    """nft commands that drop every BFD control packet arriving at `node`."""
    return ["nft", "add table inet bfdtest; add chain inet bfdtest in { type filter hook input "
            "priority 0; }; add rule inet bfdtest in udp dport 3784 drop"]


def detection_ms(lab: Lab, deaf: str, watcher: EngineWatch | BfdWatch) -> tuple[float, float]:
    """How long `deaf`'s side takes to call its session down after the last BFD packet it
    took in, as the range it must lie in. The detection timer runs from that packet, not from
    the drop: a peer that sends late (a loaded host) leaves less of it after the drop. A
    capture times each packet's arrival ahead of the drop; the drop began somewhere while nft
    ran, so the last packet taken in is the last to arrive before nft began or one that
    arrived while it ran. The offload's feed says on which tick its timers gave the verdict
    (a vCPU that stalls for milliseconds delays only the telling); bfdd's verdict is read up
    to a wake-up's lateness after it was given."""
    port = (deaf, lab.plan.node(deaf).interfaces[0].name)
    with capture(lab, [port], "udp dst port 3784") as heard, \
            WakeupLateness() as load:
        time.sleep(2 * lab.plan.bfd.interval_ms / 1000)  # packets heard before the drop
        before = time.time()
        lab.runtime.run(deaf, silence(lab, deaf), check=True)
        after = time.time()
        try:
            down = first_change(watcher, up=False, timeout=5)
            seen = time.time()
        finally:
            lab.runtime.run(deaf, ["nft", "delete table inet bfdtest"], check=True)
    seconds_until_all(watcher, True, 1, timeout=10)
    arrivals = [float(packet.time) for packet in heard[port]]
    surely_last = max(t for t in arrivals if t < before)
    latest_last = max(t for t in arrivals if t < after)
    if down.judged is not None:
        return (down.judged - latest_last) * 1000, (down.judged - surely_last) * 1000
    return (seen - latest_last) * 1000 - load.max_ms, (seen - surely_last) * 1000


def test_an_offloaded_node_and_a_plain_bfdd_peer_time_each_other_by_the_peers_multiplier(
        mixed):
    """RFC 5880 6.8.4: the detection time is the *remote* multiplier times the agreed
    interval, counted from the last packet received. r1's engine, at 3, must wait r2's 5
    intervals; r2's bfdd, at 5, waits r1's 3; each within a tick."""
    assert bfd_port_owners(mixed, "r1") == {ENGINE}
    assert bfd_port_owners(mixed, "r2") == {"bfdd"}
    bfd = mixed.plan.bfd
    assert bfd is not None
    tick = tick_ms(bfd)

    def agreed() -> list[str]:
        """Both ends Up at the lab's interval (a session comes up advertising 1 s and Polls
        its real interval in); r1's view is what its engine reported to bfdd."""
        views = [(node, peer) for node in ("r1", "r2") for peer in json.loads(
            mixed.frr(node).vtysh("show bfd peers json"))]
        return [f"{node}: {peer}" for node, peer in views
                if (peer["status"], peer["remote-transmit-interval"],
                    peer["remote-receive-interval"]) != ("up", bfd.interval_ms,
                                                         bfd.interval_ms)]
    wait_until(agreed, 10, lambda left: AssertionError(f"not agreed: {left}"), until=none_left)
    r1_feed = EngineWatch(str(feed_path(mixed.frr("r1").bfd_dir)))  # type: ignore[arg-type]
    seconds_until_all(r1_feed, True, 1, timeout=10)
    low, high = detection_ms(mixed, "r1", r1_feed)
    print(f"r1's engine called r2 down {low:.1f}-{high:.1f} ms after its last packet")
    assert high >= 5 * bfd.interval_ms - tick and low <= 5 * bfd.interval_ms + tick, (low, high)
    r2_bfdd = watch(mixed, "r2")
    seconds_until_all(r2_bfdd, True, 1, timeout=10)
    low, high = detection_ms(mixed, "r2", r2_bfdd)
    print(f"r2's bfdd called r1 down {low:.1f}-{high:.1f} ms after its last packet")
    assert high >= 3 * bfd.interval_ms - tick and low <= 3 * bfd.interval_ms + tick, (low, high)


def test_with_offload_off_bfdd_runs_its_sessions(in_bfdd):
    assert_each_session_came_up_once(in_bfdd)
    assert bfd_port_owners(in_bfdd, "r1") == {"bfdd"}
    seconds_until_all(watch(in_bfdd, "r1"), True, 2, timeout=10)  # one per link
    assert not any(ENGINE in (in_bfdd.runtime.run("r1", ["cat", f"/proc/{pid}/comm"]).stdout)
                   for pid in in_bfdd.runtime.node_processes("r1"))


def test_bgp_reset_drops_the_sessions_and_its_undo_waits_for_them(offloaded):
    faults = Faults(offloaded)
    fault = faults.bgp_reset("r1")
    peers = offloaded.frr("r1").bgp_connections()
    assert all(dropped >= 1 for _, dropped in peers.values()), peers
    faults.undo(fault)  # returns once every reset session is Established again
    assert set(offloaded.frr("r1").bgp_peer_states().values()) == {"Established"}


def bfd_sockets(lab: Lab, node: str, port: str) -> set[tuple[str, str]]:
    """(local, peer) address:port of the node's connected UDP sockets with `port` on the given
    side ("sport" or "dport")."""
    out = lab.runtime.run(node, ["ss", "-Hun", "state", "established", f"{port} = :3784"],
                          check=True)
    return {tuple(re.sub(r"%[^:]+", "", end) for end in line.split()[2:4])  # no %device
            for line in out.stdout.splitlines()}


def test_each_session_reads_from_a_socket_connected_to_its_peer(offloaded):
    """The engine reads a session's packets from a socket connected to the peer's source port
    (so the kernel's early demux skips the route lookup, fl_bfd.c connect_rx); when the peer
    runs its sessions anew, from new ports, the sockets follow them."""
    def sent_by_r2() -> set[tuple[str, str]]:  # (r1's address:3784, r2's address:port)
        return {(peer, local) for local, peer in bfd_sockets(offloaded, "r2", "dport")}

    def not_followed() -> set[tuple[str, str]]:  # r2's sockets r1 does not read from
        sent = sent_by_r2()
        return sent ^ bfd_sockets(offloaded, "r1", "sport") if len(sent) == 2 else {("r2", "-")}

    before = sent_by_r2()
    assert len(before) == 2 and bfd_sockets(offloaded, "r1", "sport") == before
    r2 = offloaded.plan.node("r2")
    offloaded.frr("r2").vtysh("configure terminal", f"router bgp {r2.asn}", *(
        f"no {' '.join(line.split()[:3])}"  # neighbor X bfd
        for line in bfd_attachment(offloaded.plan, r2)))
    wait_until(sent_by_r2, 2, lambda left: AssertionError(f"r2's engine still runs {left}"),
    until=none_left)
    finish_boot(offloaded, r2)
    # A new session sends at 1 s while Down (RFC 5880 6.8.3): r1 hears each within ~1 s.
    wait_until(not_followed, 5, lambda left: AssertionError(f"r1 does not follow {left}"),
    until=none_left)
    assert not sent_by_r2() & before, before  # r2 sends from new ports
    seconds_until_all(watch(offloaded, "r1"), True, 2, timeout=10)


def test_single_hop_control_packets_count_only_at_ttl_255(offloaded):
    """RFC 5881 5: a single-hop session takes a packet only if it left its sender at TTL
    255, so nothing further away can talk to it. A Down for r1's session, sent from r2's
    address at TTL 254, changes nothing; the same at 255 takes the session down (then it
    comes back, and BGP with it). Last in the module: it flaps r1's sessions."""
    session = next(p for p in json.loads(offloaded.frr("r1").vtysh("show bfd peers json"))
                   if p["interface"] == "eth1")
    down = struct.pack("!BBBBIIIII", 1 << 5, 1 << 6, 3, 24, 0x5EED, session["id"],
                       100_000, 100_000, 0)

    def make() -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind((session["peer"], 49_999))
        return sock
    sock = call_in_netns(offloaded.runtime.netns_path("r2"), make)
    r1_feed = EngineWatch(str(feed_path(offloaded.frr("r1").bfd_dir)))  # type: ignore[arg-type]
    seconds_until_all(r1_feed, True, 2, timeout=5)
    for ttl in (254, 255):
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, ttl)
        for _ in range(3):
            sock.sendto(down, (session["local"], 3784))
        went_down = select.select([r1_feed], [], [], 0.5)[0] and any(
            not s.up for s in r1_feed.read() or ())
        assert bool(went_down) == (ttl == 255), f"TTL {ttl}: down {bool(went_down)}"
    sock.close()
    seconds_until_all(r1_feed, True, 1, timeout=10)
    wait_until(lambda: [p for p, state in offloaded.frr("r1").bgp_peer_states().items()
                        if state != "Established"], 60,
               lambda left: AssertionError(f"BGP not back: {left}"), until=none_left)
