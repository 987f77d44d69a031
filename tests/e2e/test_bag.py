"""bag-mini with real FRR on SAI switches: two regions of two buildings joined by BAG switches
over 2, 40 and 400 km bundles. Every host reaches every other across buildings and regions,
and a ping across regions takes at least the light's time in the fibre of its path."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cli.headroom import measure as measure_cables
from harness.core.wait import none_left, wait_until
from harness.deploy.lab import Lab, deploy
from harness.faults.steps import flap_bundle
from harness.links import impair
from harness.nodes.columns import lab_status
from harness.nodes.switch.agent.cable import PROBES
from harness.nodes.switch.agent.client import ask
from harness.nodes.switch.sai.headroom import for_km
from harness.nodes.switch.sai.kernel import SAI_TABLE
from harness.runtime.node import HASH_SEED
from harness.testing.plugin import RUNTIME
from harness.topology.fibre import one_way_delay_us
from harness.topology.plan import Endpoint, Impairment, Lossless
from harness.topology.schema import Role
from harness.traffic.burst import BurstResult, lossless_burst
from harness.traffic.collective import ITEM
from harness.traffic.job import Measured, Training, measure
from tests.conftest import TOPOLOGIES

pytestmark = pytest.mark.e2e
PINGS = 20
FLAPS, FLAP_S = 10, 5.0  # ten flaps within a minute: down 1 s, then up until re-established
# Distinct source ports; about half reach r1-bag1, where a third of 4,096 flows has a
# sampling error of 0.7 points: the 10% of a third (3.3 points) is over 4 of it.
FLOWS = 8192
INTER_REGION_US = 5000.0
TURNS = 3  # each algorithm's, alternating
ALL_REDUCE_BYTES = 16 << 10
# TCP/IP headers on 1448-byte segments (4.6%) and their acks, beyond a one-item all-reduce's
HEADERS_MAX = 1.2
# Sends one UDP datagram from each of FLOWS source ports to the host's loopback (nothing
# listens: the switches forward it all the same, hashing each flow on its ports).
SPRAY = """
import socket, sys
dst, flows = sys.argv[1], int(sys.argv[2])
for sport in range(20000, 20000 + flows):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("", sport))
    for _ in range(2):
        s.sendto(b"x" * 64, (dst, 9))
    s.close()
"""


@pytest.fixture(scope="module")
def bag() -> Iterator[Lab]:
    lab = deploy(TOPOLOGIES / "bag-mini.yml", name="e2ebag", runtime=RUNTIME, timeout=240)
    yield lab
    lab.destroy()


def rtts_ms(lab: Lab, src: str, dst: str) -> list[float]:
    out = lab.node(src).cmd("ping", "-n", "-c", str(PINGS), "-i", "0.05", "-W", "2",
                            lab.plan.node(dst).loopback4 or "", timeout=60)
    return [float(t) for t in re.findall(r"time=([0-9.]+) ms", out.stdout)]


def test_every_host_reaches_every_host_across_buildings_and_regions(bag: Lab) -> None:
    hosts = [n.name for n in bag.plan.nodes if n.role is Role.host]
    for src in hosts:
        for dst in hosts:
            if src != dst and src < dst:
                out = bag.node(src).cmd("ping", "-n", "-c", "1", "-W", "3",
                                        bag.plan.node(dst).loopback4 or "")
                assert out.returncode == 0, f"{src} -> {dst}: {out.stdout[-300:]}"


def test_a_ping_across_regions_takes_the_fibres_time_at_least(bag: Lab) -> None:
    """r1b1-host1 -> r2b2-host1: 2 km to r1's BAG, 400 km to r2's, 40 km down to building
    r2b2, and back: the fibre alone takes 2 x 442 km of light; the engines that carry the
    delay add their lateness and the hops their forwarding, well under a millisecond here."""
    fibre_ms = 2 * one_way_delay_us(2 + 400 + 40) / 1000
    rtts = rtts_ms(bag, "r1b1-host1", "r2b2-host1")
    assert len(rtts) >= PINGS - 1, rtts  # one may go while a path settles
    assert min(rtts) >= fibre_ms, (fibre_ms, rtts)
    assert statistics.median(rtts) <= fibre_ms + 1.0, (fibre_ms, rtts)
    local = rtts_ms(bag, "r1b1-host1", "r1b1-host2")  # one building: no long haul
    assert statistics.median(local) < fibre_ms / 4, local


def test_inspect_places_every_node_and_bag_sessions_are_ebgp_across_regions(bag: Lab) -> None:
    rows = {r["node"]: r for r in lab_status(bag)}
    assert rows["r1-bag1"]["region"] == "r1" and "building" not in rows["r1-bag1"]
    assert (rows["r2b2-leaf1"]["region"], rows["r2b2-leaf1"]["building"]) == ("r2", "r2b2")
    assert all(r["state"] == "running" for r in rows.values()), [
        (n, r["state"], r.get("sai")) for n, r in rows.items() if r["state"] != "running"]
    across = [s for s in bag.plan.sessions if {s.node[:2], s.peer[:2]} == {"r1", "r2"}]
    assert across and all(s.local_asn != s.peer_asn for s in across)
    assert all(set(bag.frr(n).bgp_peer_states().values()) == {"Established"}
               for n in ("r1-bag1", "r2-bag2"))


def tx_packets(lab: Lab, node: str) -> dict[str, int]:
    out = lab.node(node).cmd("ip", "-s", "-j", "link", check=True).stdout
    return {link["ifname"]: link["stats64"]["tx"]["packets"] for link in json.loads(out)}


def split_towards(lab: Lab, node: str, peers: tuple[str, str]) -> float:
    """The share of FLOWS flows r1b1-host1 -> r2b2-host1 that `node` sends to peers[0],
    of what it sends to either (its egress counters, bundle members summed)."""
    ports = {peer: [i.name for i in lab.plan.node(node).interfaces if i.peer.node == peer]
             for peer in peers}
    before = tx_packets(lab, node)
    lab.node("r1b1-host1").cmd(sys.executable, "-c", SPRAY,
                               lab.plan.node("r2b2-host1").loopback4 or "", str(FLOWS),
                               check=True, timeout=120)
    after = tx_packets(lab, node)
    sent = {peer: sum(after[p] - before[p] for p in names) for peer, names in ports.items()}
    return sent[peers[0]] / sum(sent.values())


def test_link_bandwidth_weights_the_paths_by_the_capacity_up_behind_them(bag: Lab) -> None:
    """One of r2-bag1's two members to building r2b2 goes down: r2-bag1 now advertises r2b2's
    prefixes with 1 path of link bandwidth, r2-bag2 with 2, and r1-bag1 sends a third of the
    flows to r2-bag1 where it sent half (plain ECMP over its four sessions would keep half).
    The member back, the split is even again."""
    seeds = {bag.node(n).cmd("sysctl", "-n", HASH_SEED).stdout for n in ("r1b1-spine1",
                                                                         "r1-bag1")}
    assert len(seeds) == 2, seeds  # a shared seed polarizes the tiers (runtime/node.py)
    peers = ("r2-bag1", "r2-bag2")
    even = split_towards(bag, "r1-bag1", peers)
    assert abs(even - 0.5) <= 0.1 * 0.5, even
    member = next(i.name for i in bag.plan.node("r2-bag1").interfaces
                  if i.peer.node == "r2b2-spine1")
    bag.node("r2-bag1").cmd("ip", "link", "set", member, "down", check=True)
    try:
        wait_for_weights(bag, "r1-bag1", expected=(1, 1, 2, 2))
        weighted = split_towards(bag, "r1-bag1", peers)
        assert abs(weighted - 1 / 3) <= 0.1 * (1 / 3), weighted
    finally:
        bag.node("r2-bag1").cmd("ip", "link", "set", member, "up", check=True)
    wait_for_weights(bag, "r1-bag1", expected=(1, 1, 1, 1))
    assert abs(split_towards(bag, "r1-bag1", peers) - 0.5) <= 0.1 * 0.5


def group_weights(lab: Lab, node: str, prefix: str) -> list[int]:
    """The weights of the kernel nexthop group the SAI agent programmed for `prefix`."""
    route = lab.node(node).cmd("ip", "route", "show", "table", str(SAI_TABLE), prefix).stdout
    found = re.search(r"nhid (\d+)", route)
    if not found:
        return []
    group = lab.node(node).cmd("ip", "nexthop", "show", "id", found[1]).stdout
    members = re.search(r"group (\S+)", group)
    return [int(m.split(",")[1]) if "," in m else 1 for m in members[1].split("/")] \
        if members else []


def wait_for_weights(lab: Lab, node: str, expected: tuple[int, ...]) -> None:
    """Until the kernel's group for r2b2-host1 weighs its members as `expected` (zebra gives
    whole percentages: 17/17/33/33 is 1:1:2:2)."""
    prefix = f"{lab.plan.node('r2b2-host1').loopback4}/32"
    seen: list[list[int]] = []

    def ratio() -> list[str]:
        weights = group_weights(lab, node, prefix)
        seen.append(weights)
        if weights and tuple(sorted(round(w / min(weights)) for w in weights)) == expected:
            return []
        return [f"weights {weights}"]
    wait_until(ratio, 30, lambda left: AssertionError(f"{node}: {seen[-3:]} not {expected}"),
    until=none_left)


def cables(lab: Lab, node: str) -> dict[str, dict]:
    return {r["port"]: r for r in measure_cables(lab) if r["node"] == node}


def test_switches_measure_their_cables_and_size_headroom_from_them(bag: Lab) -> None:
    """r1-bag1 measures each long-haul port to the agent at its far end (kernel stamps both
    ends, the reflector's residence taken out). Physics bounds it: never less than the
    fibre's delay, and no more than that plus what the two impairment engines carrying the
    probes say their frames left late (on this VM tens of microseconds a crossing, so a 2 km
    cable reads long). Headroom grows with the length, provisioning every port for the
    longest would reserve several times more, a link made longer live is measured so next
    time, and a warm restart keeps the profiles set."""
    rows = cables(bag, "r1-bag1")
    assert len(rows) == 8, rows  # 2 + 2 bundle members to r1's buildings, 4 to r2's BAG
    late = {str(row.endpoint): row.counters.get("late_max_us", 0.0)
            for row in impair.show(bag)}
    for port, row in rows.items():
        far = next(i.peer for i in bag.plan.node("r1-bag1").interfaces if i.name == port)
        fibre_us = one_way_delay_us(row["configured_km"])
        engines_us = (late[f"r1-bag1:{port}"] + late[str(far)]) / 2
        print(f"{port} {row['configured_km']:g} km: measured {row['km']:g} km "
              f"({row['one_way_us']:.1f} us one way; fibre {fibre_us:.1f} us, the engines' "
              f"worst lateness {engines_us:.1f} us a crossing)")
        assert row["answered"] >= PROBES - 2, row
        assert fibre_us - 1 <= row["one_way_us"] <= fibre_us + engines_us + 1, row
    by_km = {km: [r["headroom_bytes"] for r in rows.values() if r["configured_km"] == km]
             for km in (2, 40, 400)}
    assert max(by_km[2]) < min(by_km[40]) and max(by_km[40]) < min(by_km[400]), by_km
    worst = sum(r["worst_case_bytes"] for r in rows.values())
    used = sum(r["headroom_bytes"] for r in rows.values())
    print(f"headroom from the measurements {used / 1e6:.1f} MB; every port provisioned for "
          f"{max(r['configured_km'] for r in rows.values()):g} km: {worst / 1e6:.1f} MB "
          f"({worst / used:.2f}x)")
    assert worst > used  # every port shorter than the longest cable reserves less
    dump = agent_dump(bag, "r1-bag1", "BUFFER_PROFILE")
    assert sorted(p["SAI_BUFFER_PROFILE_ATTR_XOFF_TH"] for p in dump) == sorted(
        r["headroom_bytes"] for r in rows.values())

    port = next(name for name, r in rows.items() if r["configured_km"] == 40)
    far = next(i.peer for i in bag.plan.node("r1-bag1").interfaces if i.name == port)
    longer = Impairment(delay_us=one_way_delay_us(100))
    for end in (Endpoint(node="r1-bag1", iface=port), far):
        impair.apply(bag, end, longer)
    try:
        row = cables(bag, "r1-bag1")[port]
        late = {str(r.endpoint): r.counters.get("late_max_us", 0.0) for r in impair.show(bag)}
        engines_us = (late[f"r1-bag1:{port}"] + late[str(far)]) / 2
        grew = row["one_way_us"] - rows[port]["one_way_us"]  # 60 km more fibre: 294 us
        assert one_way_delay_us(100) - 1 <= row["one_way_us"], row
        assert abs(grew - one_way_delay_us(60)) <= engines_us + 1, (grew, engines_us)
    finally:
        original = Impairment(delay_us=one_way_delay_us(40))
        for end in (Endpoint(node="r1-bag1", iface=port), far):
            impair.apply(bag, end, original)
    set_now = agent(bag, "r1-bag1")["lossless_headroom"]
    assert labctl_sai(bag, "r1-bag1", "restart").returncode == 0
    assert agent(bag, "r1-bag1")["lossless_headroom"] == set_now
    assert len(agent_dump(bag, "r1-bag1", "BUFFER_PROFILE")) == 8


def agent(lab: Lab, node: str) -> dict:
    return ask(lab.frr(node).workdir, {"cmd": "status"})


def agent_dump(lab: Lab, node: str, kind: str) -> list[dict]:
    return ask(lab.frr(node).workdir, {"cmd": "dump", "types": [kind]}).get(
        f"SAI_OBJECT_TYPE_{kind}", [])


def labctl_sai(lab: Lab, node: str, action: str) -> subprocess.CompletedProcess[str]:
    labctl = Path(sys.executable).with_name("labctl")
    return subprocess.run([str(labctl), "sai", f"{lab.plan.name}/{node}", action],
                          capture_output=True, text=True, timeout=120)


def updates_received(lab: Lab, node: str) -> int:
    peers = lab.frr(node).show_json("bgpd", "show bgp neighbors")
    return sum(peer["messageStats"]["updatesRecv"] for peer in peers.values())


def settled(lab: Lab) -> None:
    """Every session up and the UPDATEs a flap causes delivered (BGP sends them at once:
    advertisement-interval 0), so a count taken now is final."""
    wait_until(lambda: [n for n in lab.node_names if lab.plan.node(n).role is not Role.host
                        and set(lab.frr(n).bgp_peer_states().values()) != {"Established"}],
               30, lambda left: AssertionError(f"not settled: {left}"), until=none_left)
    time.sleep(2.0)


def set_damping(lab: Lab, on: bool) -> None:
    damping = lab.plan.damping
    assert damping is not None
    line = (f"bgp dampening {damping.half_life} {damping.reuse} {damping.suppress} "
            f"{damping.max_suppress}") if on else "no bgp dampening"
    for node in (n.name for n in lab.plan.nodes if n.role is Role.bag):
        lab.frr(node).vtysh("configure terminal", f"router bgp {lab.plan.node(node).asn}",
                            *(cmd for afi in ("ipv4", "ipv6")
                              for cmd in (f"address-family {afi} unicast", line,
                                          "exit-address-family")))


def test_damping_suppresses_a_flapping_long_haul_link(bag: Lab) -> None:
    """The 40 km bundle between building r2b2 and r2-bag1 flaps ten times within a minute.
    Each flap has r2-bag1 withdraw r2b2's prefixes from region r1's BAG switches over their
    healthy 400 km sessions. With damping (RFC 2439's defaults, on the BAG switches) r1-bag1
    suppresses what r2-bag1 says of them from the third flap on, so its own paths, and what
    it tells r1's buildings, stop changing; without, every flap reaches r1b1-spine1. (FRR
    damps withdrawals on a live session; routes lost with a session that went down are not
    counted, so the flapping bundle is one hop away from the damping switch.) Both counts
    come from this run; reuse takes most of an hour, which the nightly reports."""
    bundle = [i.name for i in bag.plan.node("r2-bag1").interfaces
              if i.peer.node == "r2b2-spine1"]
    counts = {}
    for damping in (True, False):
        set_damping(bag, on=damping)
        settled(bag)
        before = updates_received(bag, "r1b1-spine1")
        flap_bundle(bag, "r2-bag1", bundle, times=FLAPS, period_s=FLAP_S)
        settled(bag)
        counts[damping] = updates_received(bag, "r1b1-spine1") - before
        if damping:
            dampened = bag.frr("r1-bag1").vtysh("show bgp ipv4 unicast dampening "
                                                "dampened-paths")
            assert f"{bag.plan.node('r2b2-host1').loopback4}/32" in dampened, dampened
    set_damping(bag, on=True)
    print(f"UPDATEs r1b1-spine1 received over {FLAPS} flaps of a long-haul bundle: "
          f"{counts[True]} with damping, {counts[False]} without")
    assert counts[False] >= 2 * FLAPS, counts  # every flap reached it: a withdraw and a return
    assert counts[True] <= counts[False] / 2, counts


def replica_hosts(lab: Lab) -> list[str]:
    return [n.name for n in lab.plan.nodes if n.role is Role.host]


def test_a_killed_replica_is_excluded_and_the_others_keep_synchronizing(bag: Lab) -> None:
    """Eight replicas in two regions all-reduce across BAG; r2's leader (the replica that
    carries its region's share over the long haul) is killed after iteration 2. The next
    iteration excludes it, and every later one completes with the seven others."""
    hosts, victim = replica_hosts(bag), "r2b1-host1"
    with Training(bag, hosts, algorithm="hierarchical", size=64 << 10, iterations=10) as run:
        run.wait_iteration(2)
        run.kill(victim)
        result = run.wait()
    assert result.error is None, result
    [restart] = result.restarts
    print(f"{victim} killed after iteration 2: excluded at iteration {restart.iteration} "
          f"(epoch {restart.epoch}); survivors aborted with: {restart.aborts}")
    assert restart.excluded == [victim] and restart.why == {victim: "connection closed"}
    assert restart.iteration >= 3
    done = {i.iteration: i.members for i in result.iterations}
    assert sorted(done) == list(range(10))
    assert all(victim in done[k] for k in range(restart.iteration))
    assert all(sorted(done[k]) == sorted(set(hosts) - {victim})
               for k in range(restart.iteration, 10))


def test_a_hierarchical_all_reduce_crosses_bag_less_and_finishes_sooner(bag: Lab) -> None:
    """With 5 ms one way between the regions, eight replicas all-reduce 16 KiB: flat ring
    against hierarchical. The bytes the interface counters saw crossing BAG, beyond those of
    the same algorithm on one item per replica (the rendezvous' orders and reports, a frame's
    headers and ack per message), match what each algorithm sends across plus TCP/IP headers;
    each takes at least the one-way delays its longest chain of messages crosses in a row
    (physics), the ring's chain longer, and the hierarchical finishes sooner.

    16 KiB, so each message a leader sends across fits in TCP's initial window (10 segments):
    at 64 KiB a leader's 32 KiB half took two round trips, the long haul cost the hierarchical
    (18.5 ms) about what it cost the ring (20.0, against the same runs without the delay), and
    the verdict rested on the ring's local work alone. The two take turns, four all-reduces at
    a time; a time is the median of its turns' medians, so a few seconds of other work on two
    cores falls on both, not on one."""
    across = bag.plan.links_between_regions()
    ends = [end for link in across for end in (link.a, link.b)]
    hosts = replica_hosts(bag)
    turns: dict[str, list[Measured]] = {"ring": [], "hierarchical": []}
    with impair.temporarily(bag, ends, Impairment(delay_us=INTER_REGION_US)):
        empty = {algorithm: measure(bag, hosts, algorithm, size=len(hosts) * ITEM,
                                    iterations=4, across=across) for algorithm in turns}
        for _ in range(TURNS):
            for algorithm, done in turns.items():
                done.append(measure(bag, hosts, algorithm, size=ALL_REDUCE_BYTES,
                                    iterations=4, across=across))
    for algorithm, done in turns.items():
        base = empty[algorithm]
        print(f"{algorithm}: {', '.join(f'{m.seconds * 1e3:.1f}' for m in done)} ms per "
              f"all-reduce in its turns (at least {done[0].critical_crossings} x 5 ms), "
              f"{done[0].crossing_bytes / 1024:.1f} KiB across BAG for "
              f"{done[0].crossing_payload / 1024:.1f} KiB of payload (one item each: "
              f"{base.crossing_bytes / 1024:.1f} KiB for {base.crossing_payload} B)")
        for m in done:
            payload = m.crossing_payload - base.crossing_payload
            assert payload <= m.crossing_bytes - base.crossing_bytes <= payload * HEADERS_MAX
            assert m.seconds >= m.critical_crossings * INTER_REGION_US / 1e6
    ring, hierarchical = turns["ring"][0], turns["hierarchical"][0]
    assert hierarchical.critical_crossings < ring.critical_crossings
    assert hierarchical.crossing_bytes < ring.crossing_bytes
    seconds = {a: statistics.median(m.seconds for m in done) for a, done in turns.items()}
    assert seconds["hierarchical"] < seconds["ring"]


def test_headroom_from_the_measured_cable_keeps_a_lossless_burst_whole(bag: Lab) -> None:
    """r1-bag1 measures its 400 km cable to r2-bag1; its peer bursts RoCE-marked datagrams at
    line rate into that port, which forwards the class at a twentieth of it. The link engine
    pauses the sender one cable later: headroom from the measurement holds everything that
    was on the way; headroom sized for a 2 km cable drops."""
    port = "eth5"
    km = ask(bag.frr("r1-bag1").workdir, {"cmd": "cable", "ports": [port]},
             timeout=60)[0]["km"]
    receiver = Endpoint(node="r1-bag1", iface=port)
    link = bag.plan.link_at(receiver)
    sender = bag.plan.peer_of(receiver)

    def burst(headroom_km: float) -> BurstResult:
        lossless = Lossless(xoff=30_000, headroom=for_km(headroom_km, 100_000_000, 1500).bytes,
                            drain_bps=5_000_000, dscp=26)
        return lossless_burst(bag, sender, Impairment(
            delay_us=link.impairment.delay_us, rate_bps=100_000_000, lossless=lossless),
            count=400, size=1400)

    measured, short = burst(km), burst(2.0)
    print(f"400 km measured as {km:.1f} km: {measured}; with a 2 km cable's headroom: {short}")
    assert measured.pauses > 0 and measured.dropped == 0 and measured.received == 400
    in_flight = 2 * link.impairment.delay_us / 1e6 * 100_000_000 / 8
    assert measured.peak - 30_000 >= in_flight - 2 * 1500  # the PAUSE took a cable's time
    assert short.dropped > 0 and short.received == 400 - short.dropped
