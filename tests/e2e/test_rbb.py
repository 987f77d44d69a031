"""RBB on rbb-mini with real FRR and the SAI switches' SRv6 (the userspace engine where the
kernel has no seg6, the kernel's own where it has; `make nightly` runs it on both).

    campus1 - bb1 - bb2 - bb3 - campus2      ring bb1-bb2-bb3-bb4-bb1, chord bb1-bb3
                 \\--- bb4 ---/

The policies send campus 1's traffic to campus 2 round the ring through bb2 (fallback: bb4),
while BGP's shortest path is the chord: what the captures see on each link says which way
the packets went.
"""

from __future__ import annotations

import re
import time
from itertools import pairwise

import pytest
from scapy.layers.inet6 import IPv6, IPv6ExtHdrSegmentRouting

from harness.core.wait import wait_until
from harness.linux.features import has
from harness.nodes.switch.agent.client import ask
from harness.testing import plan_from
from harness.testing.capture import capture, innermost, towards
from harness.testing.load import WakeupLateness
from harness.topology.plan import PolicyPlan
from harness.traffic.wire import HEADER

pytestmark = pytest.mark.e2e
SRC, DST = "campus1-host1", "campus2-host1"
POLL_S = 0.005  # how often the tests ask the agent


@pytest.fixture(scope="module")
def topology():
    return plan_from("topologies/rbb-mini.yml", name="rbb-e2e")


def policy(lab, name: str) -> PolicyPlan:
    return next(p for p in lab.plan.srv6.policies if p.name == name)


def port(lab, node: str, towards_node: str) -> str:
    return next(i.name for i in lab.plan.node(node).interfaces if i.peer.node == towards_node)


def te(lab, name: str) -> dict:
    status = ask(lab.frr("bb1").workdir, {"cmd": "status"})
    return next(p for p in status["te"] if p["name"] == name)


def received_from(lab, nodes: list[str]) -> list[tuple[str, str]]:
    """Each hop's port facing the one before it: (bb2, its port to bb1), (bb3, ... to bb2)."""
    return [(b, port(lab, b, a)) for a, b in pairwise(nodes)]


def srh_of(packets: list) -> list[tuple[str, int, list[str]]]:
    return [(p[IPv6].dst, p[IPv6ExtHdrSegmentRouting].segleft,
             list(p[IPv6ExtHdrSegmentRouting].addresses)) for p in packets]


@pytest.mark.parametrize(("name", "family"), [("v6-c1-to-c2", 6), ("v4-c1-to-c2", 4)])
def test_policy_traffic_follows_its_path_with_the_srh_hop_by_hop(lab, name: str,
                                                                 family: int) -> None:
    """Every ping crosses bb1 -> bb2 -> bb3 encapsulated, Segments Left one less at each hop;
    none takes the chord (BGP's shortest path) or the fallback's first link."""
    plan = policy(lab, name)
    src, dst = lab.plan.node(SRC), lab.plan.node(DST)
    on_path = received_from(lab, plan.path.hops)
    elsewhere = [("bb3", port(lab, "bb3", "bb1")), ("bb4", port(lab, "bb4", "bb1"))]
    address = dst.loopback6 if family == 6 else dst.loopback4
    with capture(lab, on_path + elsewhere) as seen:
        out = lab.node(SRC).cmd("ping", f"-{family}", "-c", "5", "-i", "0.1", "-I",
                                src.loopback6 if family == 6 else src.loopback4, address)
    assert out.returncode == 0, out.stdout
    listed = list(reversed(plan.path.segments))
    for hop, (node_port, segments_left) in enumerate(zip(on_path, (1, 0), strict=True)):
        requests = towards(seen[node_port], address)
        assert srh_of(requests) == [(plan.path.segments[hop], segments_left, listed)] * 5, \
            (node_port, requests)
    for node_port in elsewhere:
        assert towards(seen[node_port], address) == [], node_port


def test_a_failed_link_moves_the_policy_to_its_fallback_within_the_probes_time(
        lab, faults, traffic) -> None:
    """bb2-bb3 goes down under a flow: the headend's probes of the path stop coming back and
    within `misses` intervals (one more for the tick that notices, plus how late the agent
    wakes) the flow runs round the other side. Bounded by that mechanism, counted from when
    the link was down on both ends (the first end went down up to the fault's applying time
    before)."""
    srv6 = lab.plan.srv6
    interval_ms = srv6.probe_interval_us / 1000
    name = "v6-c1-to-c2"
    fallback = policy(lab, name).fallback
    with WakeupLateness() as load:
        result = traffic.flow(SRC, DST, ipv6=True, count=3000, rate_pps=1000,
                              actions=[(1.0, "bb2-bb3 down", lambda: faults.link_down("bb2--bb3"))])
    state = te(lab, name)
    assert state["active"] == fallback.hops, state
    assert state["switches"][-1]["why"] == "probes", state
    fault = faults.history[-1]
    applying_ms = (fault.applied_ns - fault.injected_ns) / 1e6
    down_s = result.marks["bb2-bb3 down"] + applying_ms / 1000
    bound_ms = (srv6.probe_misses + 1) * interval_ms + 3 * load.max_ms
    assert result.first_loss_s is not None and result.last_loss_s is not None, result
    assert (result.last_loss_s - down_s) * 1000 <= bound_ms, (result, bound_ms)
    # the loss may start as soon as the first end is down: up to `applying_ms` earlier
    assert result.outage_ms <= bound_ms + applying_ms, (result, bound_ms, applying_ms)


def test_the_policy_returns_to_its_path_once_probes_come_back(lab, faults) -> None:
    """Revertive. With the link back, bb2 resolves bb3 again for its End.X: at once, or one ND
    retransmission later when the first solicitation is lost as the link returns (RFC 4861's
    RetransTimer, bb2's own setting, which Linux runs on its timer wheel: a timer that long
    fires up to an eighth of its length late, the wheel's granularity there). A lost
    solicitation left before both ends were up, so its retransmission is due within that long
    after they are: the time counts from there. From the first probe back, `probe_up` in a
    row and the tick that sees them, but never before the hold-down since the path broke."""
    srv6 = lab.plan.srv6
    interval_ms = srv6.probe_interval_us / 1000
    name = "v6-c1-to-c2"
    primary = policy(lab, name).path
    retrans_ms = retransmit_ms(lab)
    fault = faults.link_down("bb2--bb3")
    wait_until(lambda: te(lab, name)["active"], 5, every=0.01,
               until=lambda active: active != primary.hops)
    broke = te(lab, name)["switches"][-1]["at"]
    with WakeupLateness() as load:
        received = te(lab, name)["paths"][0]["received"]
        faults.undo(fault)  # both ends are up when it returns
        started, first_back = time.time(), []

        def active() -> list[str]:
            state = te(lab, name)
            if not first_back and state["paths"][0]["received"] > received:
                first_back.append(time.time())
            return state["active"]

        wait_until(active, 5, every=POLL_S, until=lambda hops: hops == primary.hops)
        back = time.time()
    assert first_back
    resolved_ms = (first_back[0] - started) * 1000
    assert resolved_ms <= retrans_ms * 9 / 8 + 2 * interval_ms + 3 * load.max_ms, resolved_ms
    due = max(first_back[0] + (srv6.probe_up + 1) * interval_ms / 1000,
              broke + srv6.hold_down_us / 1e6 + interval_ms / 1000)
    # seen up to one poll of the agent later than it moved
    assert (back - due) * 1000 <= 3 * load.max_ms + POLL_S * 1000, (back, due, load.max_ms)
    assert back >= broke + srv6.hold_down_us / 1e6, "returned inside the hold-down"


def retransmit_ms(lab) -> int:
    port = next(i.name for i in lab.plan.node("bb2").interfaces if i.peer.node == "bb3")
    return int(lab.node("bb2").cmd("sysctl", "-n",
                                    f"net.ipv6.neigh.{port}.retrans_time_ms").stdout)


def sequences(packets: list, address: str) -> list[int]:
    """The test flow's sequence numbers among the packets towards `address`."""
    return [HEADER.unpack(bytes(innermost(p).payload.payload)[:HEADER.size])[0]
            for p in towards(packets, address)]


def test_the_wire_shows_the_policy_on_its_path_then_the_fallback_then_back(
        lab, faults, traffic) -> None:
    """Captured at the first hop of each way out of bb1 (bb2 for the path, bb4 for the
    fallback, bb3 for BGP's chord): in the order the flow sent them, its packets cross the
    path, then the fallback once bb2-bb3 is down, then the path again once it is back and
    the hold-down is over; none takes the chord, and the return loses nothing."""
    name = "v6-c1-to-c2"
    plan = policy(lab, name)
    address = lab.plan.node(DST).loopback6
    ways = {"path": ("bb2", port(lab, "bb2", "bb1")), "fallback": ("bb4", port(lab, "bb4", "bb1")),
            "chord": ("bb3", port(lab, "bb3", "bb1"))}
    srv6 = lab.plan.srv6
    # back: the link at 1 s, bb2's neighbour resolved (one retransmission at worst), the hold-
    # down over, `probe_up` probes and a tick; the flow runs half a second past that
    back_by_s = max(1.0 + retransmit_ms(lab) * 9 / 8 / 1000, 0.5 + srv6.hold_down_us / 1e6) \
        + (srv6.probe_up + 2) * srv6.probe_interval_us / 1e6
    moves = te(lab, name)["moves"]
    fault: list = []
    with capture(lab, list(ways.values()), "ip6") as seen:
        result = traffic.flow(SRC, DST, ipv6=True, rate_pps=1000,
                              count=round((back_by_s + 0.5) * 1000), actions=[
                                  (0.5, "down", lambda: fault.append(faults.link_down("bb2--bb3"))),
                                  (1.0, "up", lambda: faults.undo(fault[0]))])
    state = te(lab, name)
    assert state["active"] == plan.path.hops and state["moves"] == moves + 2, state
    on = {way: sequences(seen[ends], address) for way, ends in ways.items()}
    assert on["chord"] == [], ("BGP's shortest path carried policy traffic", state, [
        p.summary() for p in towards(seen[ways["chord"]], address)[:3]])
    order = sorted([(seq, way) for way in ("path", "fallback") for seq in on[way]])
    runs = [way for i, (_, way) in enumerate(order) if i == 0 or order[i - 1][1] != way]
    assert runs == ["path", "fallback", "path"], runs
    missing = set(range(result.sent)) - set(on["path"]) - set(on["fallback"])
    assert all(seq < min(on["fallback"]) for seq in missing), "lost after the failover"


def test_a_path_that_answers_every_other_probe_stays_broken(lab, faults) -> None:
    """bb1 drops every other probe of the policy's path on its way out (its own sequence
    number's last bit, matched by nftables in bb1's output path: the data the policy steers
    is forwarded, not sent by bb1, so it is untouched). With bb2-bb3 back the path answers
    half its probes: never `probe_up` in a row, so it stays broken and the policy stays on
    its fallback, well past the hold-down; with every probe back it returns."""
    srv6 = lab.plan.srv6
    interval_s = srv6.probe_interval_us / 1e6
    name = "v6-c1-to-c2"
    plan = policy(lab, name)
    index = lab.plan.srv6.policies.index(plan)
    fault = faults.link_down("bb2--bb3")
    wait_until(lambda: te(lab, name)["active"], 5, every=0.01,
               until=lambda active: active == plan.fallback.hops)
    before = te(lab, name)["paths"][0]
    # the probe's policy and path, then its sequence number, past the outer IPv6 header, the
    # SRH, the inner IPv6 and UDP headers and the magic
    at = 40 + 8 + 16 * len(plan.path.probe) + 40 + 8 + 4
    table = "fl_test_every_other_probe"
    script = lab.node_dir("bb1") / f"{table}.nft"  # the node's directory: every runtime's
    script.write_text(f"table inet {table} {{\n chain out {{\n"
                      "  type filter hook output priority 0;\n"
                      f"  ip6 nexthdr 43 @nh,{at * 8},32 {index << 16} "
                      f"@nh,{(at + 4) * 8 + 31},1 0 counter drop\n }}\n}}\n")
    bb1 = lab.node("bb1")
    bb1.cmd("nft", "-f", str(script), check=True)
    try:
        faults.undo(fault)
        time.sleep(retransmit_ms(lab) * 9 / 8 / 1000 + srv6.hold_down_us / 1e6
                   + 10 * srv6.probe_up * interval_s)
        state = te(lab, name)
        path = state["paths"][0]
        listed = bb1.cmd("nft", "list", "table", "inet", table, check=True).stdout
        dropped = int(re.search(r"counter packets (\d+)", listed)[1])  # type: ignore[index]
        sent, back = path["sent"] - before["sent"], path["received"] - before["received"]
        # every other: the rule went in after `before` and was read after `state`
        assert abs(dropped - sent / 2) <= 2, (dropped, sent)
        assert back >= 5 * srv6.probe_up, ("the path never answered", path)
        assert not path["up"] and state["active"] == plan.fallback.hops, state
    finally:
        bb1.cmd("nft", "delete", "table", "inet", table)
    wait_until(lambda: te(lab, name)["active"], 2, every=0.01,
               until=lambda active: active == plan.path.hops)


def test_labctl_srv6_shows_the_routers_and_the_policy_in_use(lab) -> None:
    from harness.cli.srv6 import collect
    routers = collect(lab)
    assert sorted(routers) == ["bb1", "bb2", "bb3", "bb4"]
    # the kernel's own SRv6 wherever it can do every behaviour (End.DT4 needs VRF), else the
    # engine, saying why
    kernel = all(has(f) for f in ("seg6", "seg6local", "vrf"))
    assert {name: r["path"].split(":")[0] for name, r in routers.items()} == dict.fromkeys(
        routers, "kernel seg6" if kernel else "userspace (fl-srv6)"), routers
    bb1 = routers["bb1"]
    assert {s.sid for s in lab.plan.node("bb1").sids} == set(bb1["sids"])
    assert [p["active"] for p in bb1["te"]] == [p.path.hops for p in lab.plan.srv6.policies]
