"""FPF on fpf-mini with real FRR: per-packet spraying over 8 planes and host-steered failover.

Hosts 1-2 sit on leaf1 and hosts 3-4 on leaf2 of every plane, so host1 -> host3 crosses a
spine in each plane while host3 -> host4 stays below leaf2.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.utils import rdpcap

from harness.core.events import read
from harness.core.wait import wait_until
from harness.instruments.capacity import node_kind
from harness.instruments.pcapng import INBOUND, OUTBOUND
from harness.nodes.rdma.engine import Settings
from harness.spray import probe
from harness.spray.agent import JOIN_BATCH_S
from harness.spray.nic import (
    WAIT_POLL_S,
    planes_to_hosts,
    probe_timing,
    read_spray,
    spray_status,
    wait_spray,
)
from harness.testing import plan_from
from harness.testing.browser import LivePage
from harness.testing.capture import labctl_capture
from harness.testing.chaos import LABCTL, labctl
from harness.testing.footprint import node_process
from harness.testing.load import WakeupLateness
from harness.testing.steering import assert_probes_steered, switch_after_fault
from harness.traffic.rdma import rdma

pytestmark = pytest.mark.e2e

PLANES = set(range(8))
HOSTS = ("host1", "host2", "host3", "host4")
RATE = 2000
TRIALS = 5  # of the gray-plane test: each is lost to a BFD drop about one time in ten
REPORTS = Path(__file__).resolve().parents[2] / "reports" / "live-view"
SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "fpf-plane-failover.yml"
RDMA_NIC_BPS = 10_000_000  # each plane NIC's line rate for fl-rdma: 8 planes, 80 Mbit/s


@pytest.fixture(scope="module")
def topology():
    return plan_from("topologies/fpf-mini.yml", name="fpf-e2e")


def test_single_flow_is_sprayed_evenly_over_all_planes(lab, traffic):
    result = traffic.flow("host1", "host3", count=10_000, rate_pps=RATE)
    assert result.lost == 0, result
    assert set(result.per_plane) == PLANES
    even = result.received / len(PLANES)
    for plane, count in result.per_plane.items():
        assert abs(count - even) <= 0.05 * even, f"plane {plane}: {count} of {result.received}"


def test_plane_down_keeps_the_flow_on_the_other_planes(lab, faults, traffic):
    """Bounded by the mechanism: the hosts' probes find the silent plane within the schedule's
    detect time (plus how late the two engines and host1's agent wake while the flow runs),
    and the flow heals the moment the host's agent switches nftables (plus one packet
    interval and the packets in flight). BFD follows later and, being the slower, is what
    `inspect` ends up naming."""
    with WakeupLateness() as load:
        result = traffic.flow("host1", "host3", count=8_000, rate_pps=RATE,
                              actions=[(1.0, "plane 3 down", lambda: faults.plane_down(3))])
    assert 0 < result.lost < result.sent / 8, result  # only plane 3's share, only briefly
    assert set(result.per_plane_after_outage) == PLANES - {3}
    assert planes_to_hosts(lab, "host1")["host3"] == PLANES - {3}
    assert spray_status(lab, lab.plan.node("host1"))["planes"] == \
        "7/8 active: 0-2,4-7; plane 3 out: BFD down"
    assert_probes_steered(lab, faults, result, load, RATE)


def test_a_leaf_crash_is_steered_around_by_the_probes(lab, faults, traffic):
    """host1's plane-4 leaf dies (daemons and forwarding): its peers stop hearing it on plane 4
    and say so, and host1 stops spraying there, within the probes' detect time."""
    with WakeupLateness() as load:
        result = traffic.flow("host1", "host3", count=6_000, rate_pps=RATE,
                              actions=[(1.0, "p4-leaf1 crash",
                                        lambda: faults.node_crash("p4-leaf1"))])
    assert 0 < result.lost < result.sent / 8, result
    assert set(result.per_plane_after_outage) == PLANES - {4}
    assert_probes_steered(lab, faults, result, load, RATE)


def sessions_dropped(lab, hosts: tuple[str, ...]) -> int:
    """BGP sessions these hosts have seen drop, over all their peers: BFD takes BGP down with
    it, so this counts every BFD session of theirs that went down."""
    return sum(dropped for host in hosts
               for _, dropped in lab.frr(host).bgp_connections().values())


def test_a_gray_plane_is_drained_within_a_second_and_restored_when_clean(lab, faults, traffic):
    """Plane 6 loses 5% of its packets: BFD (three misses in a row) does not notice, the
    probes' loss counts do. Drained within 1 s (the goal; host1's three peers together see
    ~30 of its plane-6 probes lost a second and 10 drain it, so missing 1 s is far beyond
    any plausible odds), back once a whole window of probes went through cleanly.

    At 5% loss BFD echo (every 50 ms) does lose three in a row now and then: 0.5-2 of the
    plane's sessions drop a minute, one trial in ten or so. Any such trial tests BFD rather
    than the probes: host1's or host3's drop steers the flow itself, and another host's makes
    the restore wait for its BGP session as well (its verdicts count towards plane 6's return
    everywhere). So the trial is undone and run again with the same checks."""
    schedule = probe_timing(lab.plan)
    gray = "plane 6 loses 5%"
    leaves = ("p6-leaf1", "p6-leaf2")  # between them, every session of plane 6
    for trial in range(1, TRIALS + 1):
        dropped = sessions_dropped(lab, leaves)
        result = traffic.flow("host1", "host3", count=6_000, rate_pps=RATE,
                              actions=[(0.5, gray, lambda: faults.plane_loss(6, 5))])
        _, switched_ms = switch_after_fault(lab, faults, "host1", "host3")
        planes = spray_status(lab, lab.plan.node("host1"))["planes"]
        drained = traffic.flow("host1", "host3", count=2_000, rate_pps=RATE)
        if sessions_dropped(lab, leaves) == dropped:
            break
        print(f"trial {trial}: BFD dropped {sessions_dropped(lab, leaves) - dropped} "
              "session(s) of plane 6")
        faults.undo(faults.history[-1])
        wait_spray(lab, timeout=60)
    else:
        pytest.fail(f"BFD dropped a session of plane 6 under 5% loss in {TRIALS} trials running")
    assert switched_ms <= 1000, f"{result}; drained {switched_ms:.0f} ms after the fault"
    assert result.last_loss_s is None or result.last_loss_s - result.marks[gray] <= 1.0, result
    assert planes == "7/8 active: 0-5,7; plane 6 out: data-plane loss", planes
    assert drained.lost == 0 and set(drained.per_plane) == PLANES - {6}, drained
    with WakeupLateness() as load:
        faults.undo(faults.history[-1])
        cleaned = time.monotonic()
        wait_spray(lab, {("host1", "host3"): PLANES}, timeout=30)
        restored_s = time.monotonic() - cleaned
    # the window's last loss slides out, the next round says so, the agent batches the join
    bound_s = (schedule.window * schedule.interval_us / 1e6 + schedule.detect_ms / 1000
               + JOIN_BATCH_S + WAIT_POLL_S + 2 * load.max_ms / 1000)
    assert restored_s <= bound_s, (f"back after {restored_s:.2f} s, bound {bound_s:.2f} s; "
                                   f"wake-up lateness {load.max_ms:.0f} ms")


def test_a_stalled_host_drains_nothing(lab, traffic):
    """Planes are judged against each other: a host whose probe engine stops for twenty
    rounds (a busy CPU) delays every plane alike, and no one drains anything."""
    schedule = probe_timing(lab.plan)
    before = {h: read_spray(lab, h).switched_ns for h in HOSTS}
    engine = node_process(lab, "host1", probe.ENGINE)
    os.kill(engine, signal.SIGSTOP)
    time.sleep(20 * schedule.interval_us / 1e6)
    os.kill(engine, signal.SIGCONT)
    result = traffic.flow("host3", "host1", count=2_000, rate_pps=RATE)
    assert result.lost == 0 and set(result.per_plane) == PLANES, result
    assert {h: read_spray(lab, h).switched_ns for h in HOSTS} == before


def test_one_capture_shows_bfd_stop_and_the_flow_leave_a_plane_that_goes_down(
        lab, faults, traffic, tmp_path):
    """`labctl capture` of host1's eight NICs and the plane-3 leaf's end of their link, as a
    user runs it, stopped by Ctrl-C: one pcapng in time order across ports, in which the
    leaf's BFD stops once the fault is in place while host1's goes on (both directions of a
    port), every flow packet is received after it was sent, and the flow leaves plane 3 when
    host1's agent says it switched (give or take a packet interval for a packet marked just
    before), its share going to the seven others."""
    host1, host3 = lab.plan.node("host1"), lab.plan.node("host3")
    nic3 = next(i for i in host1.interfaces if lab.plan.node(i.peer.node).plane == 3)
    session = next(s for s in lab.plan.sessions_of("host1") if s.iface == nic3.name)
    nic_end, leaf_end = f"host1:{nic3.name}", str(nic3.peer)
    pcap = tmp_path / "plane-down.pcapng"
    changes = read_spray(lab, "host1").changes
    with labctl_capture(lab, ["host1", leaf_end], "udp port 3784 or udp port 7000",
                        pcap) as said:
        assert "capturing on 9 ports" in said[0]
        result = traffic.flow("host1", "host3", count=8_000, rate_pps=RATE,
                              actions=[(1.0, "plane 3 down", lambda: faults.plane_down(3))])
    assert "stopped by a signal" in said[-1], said
    realtime = time.time_ns() - time.monotonic_ns()  # faults and agents stamp monotonic
    injected = faults.history[-1].injected_ns + realtime  # the first switch's filter
    applied = faults.history[-1].applied_ns + realtime  # and the last's
    view = read_spray(lab, "host1")
    switched = view.switched_ns[host3.loopback4][1] + realtime
    restarts = view.changes - changes  # each nft rewrite restarts the round robin

    frames = rdpcap(str(pcap))
    stamps = [int(f.time * 10**9) for f in frames]
    assert stamps == sorted(stamps), "frames are not in time order across ports"
    ports = {f.sniffed_on for f in frames}
    assert ports == {f"host1:{i.name}" for i in host1.interfaces} | {leaf_end}, ports

    def seen(port, direction, dport, src):
        """(UDP payload, time) of what `port` sent or received to `dport` from `src`."""
        return [(bytes(f[UDP].payload), t) for f, t in zip(frames, stamps, strict=True)
                if f.sniffed_on == port and f.direction == direction and UDP in f
                and f[UDP].dport == dport and f[IP].src == src]
    for port, direction in ((leaf_end, OUTBOUND), (nic_end, INBOUND)):
        leaf_bfd = [t for _, t in seen(port, direction, 3784, session.peer_ip)]
        assert any(applied - 10**9 < t < applied for t in leaf_bfd), port
        assert leaf_bfd[-1] < applied, f"{port}: the leaf's BFD after the fault was in place"
    for port, direction in ((nic_end, OUTBOUND), (leaf_end, INBOUND)):
        assert any(t > switched for _, t in seen(port, direction, 3784, session.local_ip))

    def flow(port, direction):
        return dict(seen(port, direction, 7000, host1.loopback4))  # payloads carry a seq
    sent, received = flow(nic_end, OUTBOUND), flow(leaf_end, INBOUND)
    assert received and received.keys() <= sent.keys()
    assert all(received[k] >= sent[k] for k in received), "received before it was sent"
    assert max(sent.values()) < switched + 10**9 / RATE, "plane 3 took the flow after the switch"
    per_plane = {lab.plan.node(i.peer.node).plane: flow(f"host1:{i.name}", OUTBOUND).values()
                 for i in host1.interfaces}
    assert sum(map(len, per_plane.values())) == result.sent
    before = {p: sum(t < injected for t in ts) for p, ts in per_plane.items()}
    after = {p: sum(t > switched for t in ts) for p, ts in per_plane.items()}
    assert after[3] == 0, after
    for share, planes in ((before, PLANES), (after, PLANES - {3})):
        even = sum(share.values()) / len(planes)
        assert all(abs(share[p] - even) <= 1 + restarts for p in planes), (share, restarts)


def test_the_event_record_of_a_fault_round_is_in_order_and_gives_the_flows_outage(
        lab, faults, traffic):
    """Issue 42's event stream, as `labctl events --format json` prints it: a plane down and
    up under a flow. Each host's plane-2 BFD session goes down after the fault, its BGP session
    after that, its routes change after that; once the fault is undone the sessions come back
    and the routes follow BGP. The flow's event gives the outage the nightly report shows."""
    hosts = ("host1", "host2", "host3", "host4")
    result = traffic.flow("host1", "host3", count=6_000, rate_pps=RATE,
                          actions=[(1.0, "plane 2 down", lambda: faults.plane_down(2))])
    faults.plane_up(2)
    wait_spray(lab, timeout=30)
    fault_id = faults.history[-1].id

    def record():
        out = labctl("events", lab.plan.name, "--format", "json")
        assert out.returncode == 0, out.stderr
        return [json.loads(line) for line in out.stdout.splitlines()]

    def first(events, kind, what, node=None, after=0.0, **detail):
        return next((e for e in events if (e["kind"], e["what"]) == (kind, what)
                     and e["t"] > after and (node is None or e.get("node") == node)
                     and all(e["detail"].get(k) == v for k, v in detail.items())), None)

    def ours(events, what):  # fault ids are reused once free: the last with ours
        return ([e for e in events if (e["kind"], e["what"]) == ("fault", what)
                 and e["detail"]["id"] == fault_id and e["detail"]["fault"] == "plane_down(2)"]
                or [None])[-1]

    def settled(events):  # every host's routes changed again once its BGP came back up
        undone = ours(events, "undone")
        ups = [first(events, "bgp", "up", h, undone["t"]) for h in hosts] if undone else [None]
        return all(ups) and all(first(events, "routes", "changed", h, up["t"])
                                for h, up in zip(hosts, ups, strict=True))
    events = wait_until(record, 30, until=settled, every=0.5)
    applied, undone = ours(events, "applied"), ours(events, "undone")
    assert applied and undone and applied["t"] < undone["t"]
    for host in hosts:
        leaf = next(i.peer.node for i in lab.plan.node(host).interfaces
                    if lab.plan.node(i.peer.node).plane == 2)
        bfd_down = first(events, "bfd", "down", host, applied["t"], peer_node=leaf)
        bgp_down = first(events, "bgp", "down", host, applied["t"], peer_node=leaf)
        routes = first(events, "routes", "changed", host, applied["t"])
        assert bfd_down and bgp_down and routes, (host, bfd_down, bgp_down, routes)
        assert bfd_down["t"] <= bgp_down["t"] <= routes["t"] < undone["t"], host
        bfd_up = first(events, "bfd", "up", host, undone["t"], peer_node=leaf)
        bgp_up = first(events, "bgp", "up", host, undone["t"], peer_node=leaf)
        assert bfd_up and bgp_up and first(events, "routes", "changed", host, bgp_up["t"])
    flow = [e for e in events if e["kind"] == "flow" and e["t"] < applied["t"]][-1]
    loss = flow["detail"]
    assert (flow["node"], loss["dst"], loss["lost"]) == ("host1", "host3", result.lost) != (
        "host1", "host3", 0)
    outage_ms = (loss["last_loss_s"] - loss["first_loss_s"]) * 1000 + 1000 / loss["rate_pps"]
    assert round(outage_ms, 3) == result.outage_ms, (loss, result)
    # lost from the fault on; a packet in flight as it landed is within one interval of it
    assert applied["t"] - 1 / RATE < flow["t"] + loss["first_loss_s"] < undone["t"]


def test_a_scenario_run_five_times_on_one_seed_gives_the_same_verdicts_and_events(
        lab, tmp_path):
    """Issue 42's scenarios: scenarios/fpf-plane-failover.yml (a random plane down under a
    flow between two random hosts, then up) run five times with one seed, as a user runs it.
    Each run's JUnit verdicts, its sequence of faults and scenario steps in the event record,
    and the BFD and BGP sessions that went down and came back are the same every time."""
    runs = []
    for n in range(5):
        junit, began = tmp_path / f"run{n}.xml", time.time()
        out = labctl("scenario", "run", lab.plan.name, str(SCENARIO), "--seed", "7", "--junit",
                     str(junit))
        assert out.returncode == 0, out.stdout + out.stderr
        cases = [(c.get("name"), c.find("failure") is None)
                 for c in ET.parse(junit).getroot().iter("testcase")]
        events = [e for e in read(lab.dir) if e.t >= began]
        sequence = [(e.kind, e.what, e.detail.get("fault"), e.detail.get("step"),
                     json.dumps(e.detail.get("drawn"))) for e in events
                    if e.kind in ("fault", "scenario")]
        reactions = sorted({(e.node, e.kind, e.what, e.detail.get("peer_node"))
                            for e in events if e.kind in ("bfd", "bgp")})
        runs.append((cases, sequence, reactions))
    cases, sequence, reactions = runs[0]
    assert len(cases) == 6 and all(ok for _, ok in cases), cases  # 5 steps on, the flow
    assert [s[:2] for s in sequence if s[0] == "fault"] == [("fault", "applied"),
                                                           ("fault", "undone")]
    assert {what for _, _, what, _ in reactions} == {"down", "up"}
    for n, run in enumerate(runs[1:], 2):
        assert run == runs[0], f"run {n} differs from run 1"


def test_the_live_view_shows_a_link_go_down_within_a_second_and_come_back(lab):
    """Issue 42's live view in headless Chromium, driven as a person's browser: `labctl
    serve`'s page, asked for the link's state in its own DOM, shows it down within a second
    of `labctl fault ... link-down` having it in place (the event record says when), and up
    again after `labctl fault ... clear`. The screenshot of the down link is kept in
    reports/live-view/."""
    link = next(k for k in lab.plan.links if {k.a.node, k.b.node} == {"host1", "p1-leaf1"})
    state = f'document.querySelector(`path[data-link="{link.name}"]`)?.dataset.state'
    server = subprocess.Popen([*LABCTL, "serve", lab.plan.name, "--port", "0"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        url = re.search(r"http://\S+/", server.stdout.readline())[0]
        with LivePage(url) as page:
            wait_until(lambda: page.evaluate(state), 30, until=lambda s: s == "up", every=0.05)
            down = labctl("fault", lab.plan.name, "link-down", link.name)
            assert down.returncode == 0, down.stderr
            wait_until(lambda: page.evaluate(state), 5, until=lambda s: s == "down", every=0.02)
            seen = time.time()
            applied = [e for e in read(lab.dir) if e.kind == "fault" and e.what == "applied"
                       and link.name in e.detail["fault"]][-1]
            in_place = applied.t + applied.detail["in_place_ms"] / 1000
            assert seen - in_place < 1.0, f"the page showed it {seen - in_place:.2f} s later"
            REPORTS.mkdir(parents=True, exist_ok=True)
            assert page.screenshot(REPORTS / "link-down.png").stat().st_size > 10_000
            cleared = labctl("fault", lab.plan.name, "clear")
            assert cleared.returncode == 0, cleared.stderr
            wait_until(lambda: page.evaluate(state), 5, until=lambda s: s == "up", every=0.05)
    finally:
        server.terminate()
        server.wait(timeout=10)
    wait_spray(lab, timeout=30)  # the next test finds every plane sprayed again


def test_inspect_resources_agree_with_what_ps_says_of_each_node(lab):
    """Issue 42's resources in inspect: each node's memory as `labctl inspect --resources`
    reads it (smaps) is within 10 % of what procps' `ps` sums for the node's processes (the
    kernel's RSS counters); PSS splits what processes share, so it is below RSS; the kinds of
    process are the daemons and engines the lab runs, and they add up to the lab's total."""
    out = labctl("inspect", lab.plan.name, "--resources", "--json")
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)["resources"]
    assert {n["name"] for n in found["nodes"]} >= set(lab.node_names)
    for node in found["nodes"]:
        if node["name"] not in lab.node_names:
            continue  # KSM's thread, when the lab shares memory
        pids = lab.runtime.node_processes(node["name"])
        ps = subprocess.run(["ps", "-o", "rss=", "-p", ",".join(map(str, pids))],
                            capture_output=True, text=True, check=True).stdout.split()
        ps_mib = sum(map(int, ps)) / 1024
        assert abs(node["rss_mib"] - ps_mib) <= 0.10 * ps_mib, (node, ps_mib)
        assert 0 < node["pss_mib"] < node["rss_mib"], node
    kinds = {k["name"] for k in found["kinds"]}
    assert {"bgpd", "zebra", "bfdd", "fl-bfd", "harness.nodes.switch.agent",
            "harness.spray.agent"} <= kinds, kinds
    total = found["lab"]
    assert sum(k["processes"] for k in found["kinds"]) == total["processes"]
    assert abs(sum(k["pss_mib"] for k in found["kinds"]) - total["pss_mib"]) < 0.01
    assert 0 < found["host_mem_available_mib"] < found["host_mem_total_mib"]


def test_doctor_says_how_many_nodes_of_each_kind_this_host_takes(lab):
    """Issue 42's capacity in doctor: measured on the lab once it is at rest (its event record
    quiet, no fault in place), per kind of node. Each kind's PSS is what inspect reads for its
    nodes, and the room is the host's available memory plus what the lab holds, less the
    tenth deploy keeps free."""
    def capacity():
        return json.loads(labctl("doctor", "--json").stdout)["capacity"]
    found = wait_until(capacity, 90, until=lambda c: not c["not_measured"], every=1)
    kinds = {k["kind"]: k for k in found["kinds"] if k["lab"] == lab.plan.name}
    assert {kind: k["nodes"] for kind, k in kinds.items()} == {
        "sai leaf": 16, "sai spine": 8, "host, NIC over 8 planes": 4}, kinds
    out = labctl("inspect", lab.plan.name, "--resources", "--json")
    resources = json.loads(out.stdout)["resources"]
    pss = {n["name"]: n["pss_mib"] for n in resources["nodes"]}
    for kind, k in kinds.items():
        names = [n.name for n in lab.plan.nodes if node_kind(lab.plan, n) == kind]
        mean = sum(pss[n] for n in names) / len(names)
        assert abs(k["pss_mib"] - mean) <= 0.10 * mean, (kind, k, mean)
        assert k["fits"] > 0 and k["limit"] in ("memory", "CPU")
    room = (resources["host_mem_available_mib"] + resources["lab"]["pss_mib"]
            - 0.1 * resources["host_mem_total_mib"])
    assert abs(found["room"]["mib"] - room) <= 0.05 * room, (found["room"], room)


def test_plane_up_brings_the_flow_back_to_all_planes(lab, faults, traffic):
    """Back once BFD and BGP are up again and a whole probe window went through cleanly."""
    faults.plane_down(5)
    wait_spray(lab, {("host1", "host3"): PLANES - {5}}, timeout=10)
    result = traffic.flow("host1", "host3", count=14_000, rate_pps=RATE,
                          actions=[(0.5, "plane 5 up", lambda: faults.plane_up(5))])
    wait_spray(lab, {("host1", "host3"): PLANES}, timeout=30)
    late = traffic.flow("host1", "host3", count=2_000, rate_pps=RATE)
    assert late.lost == 0 and set(late.per_plane) == PLANES, late
    assert result.per_plane[5] > 0  # plane 5 rejoined while the flow was running


def test_a_host_port_that_flaps_comes_back_into_every_spray_set(lab, faults):
    """host1's plane-1 port down and up: once BGP is back, the kernel routes to every host
    through it again and the plane returns to host1's spray sets. zebra 8.4 left the port out
    of the kernel nexthop group the kernel had taken it out of, so the plane stayed out for
    good ('route gone'); hosts install routes with their next hops inline instead."""
    link = next(k for k in lab.plan.links if {k.a.node, k.b.node} == {"host1", "p1-leaf1"})
    faults.link_down(link.name)
    wait_spray(lab, {("host1", "host3"): PLANES - {1}}, timeout=10)
    faults.link_up(link.name)
    wait_spray(lab, timeout=30)
    route = lab.node("host1").cmd("ip", "route", "show", lab.plan.node("host3").loopback4)
    assert route.stdout.count("nexthop via") == len(PLANES), route.stdout


def test_leaf_uplink_failure_only_affects_paths_through_it(lab, faults, traffic):
    faults.link_down("p2-leaf1--p2-spine1")
    crossing = PLANES - {2}
    wait_spray(lab, {("host1", "host3"): crossing, ("host3", "host1"): crossing,
                     ("host1", "host2"): PLANES, ("host3", "host4"): PLANES}, timeout=10)
    below_leaf = traffic.flow("host3", "host4", count=4_000, rate_pps=RATE)
    across = traffic.flow("host1", "host3", count=4_000, rate_pps=RATE)
    assert below_leaf.lost == 0 and set(below_leaf.per_plane) == PLANES, below_leaf
    assert across.lost == 0 and set(across.per_plane) == crossing, across
    assert spray_status(lab, lab.plan.node("host1"))["planes"] == \
        "7/8 active: 0-1,3-7; plane 2 to 1/3 hosts: route gone"


def test_rdma_uses_every_plane_and_rides_out_a_plane_down(lab, faults):
    """MetaRoCE-style from host1 to host3 with one path per plane, each steered by its plane's
    fwmark: plane 3 goes dark mid-transfer. Its paths time out and are abandoned, what they
    held is resent on the others, and what completes in order is back to 7/8 of before
    within 50 ms, with no error for the application."""
    fault_s, end_s, window = 1.0, 2.5, 5  # 50 ms windows of 10 ms bins
    run = rdma(lab, [("host1", "host3")],
               Settings(iterations=0, duration_ms=int(end_s * 1000), paths=8,
                        rate_bps=RDMA_NIC_BPS),
               actions=[(fault_s, "plane 3 down", lambda: faults.plane_down(3))])
    flow = run.flows[0]
    assert not flow.requester.error
    assert {p.plane for p in flow.requester.paths} == PLANES
    assert all(p.abandon_timeouts <= 3 for p in flow.requester.paths)
    # per second of line time host1's NIC had (fl-rdma counts what the host held it): in CI
    # the sender waited on the run queue for 46% of a run, and its rate with it
    rates = run.line_rates_bps(flow, window, completed=True)
    bins = lambda s: int(s / run.bin_s)  # noqa: E731
    before = [r for r in rates[bins(0.3):bins(fault_s) - window] if r is not None]
    after = [r for r in rates[bins(fault_s + 0.05):bins(end_s - 0.1) - window] if r is not None]
    floor = 7 / 8 * 0.9 * sum(before) / len(before)
    gone = [(p.plane, (p.abandoned_ns - run.reports["host1"].start_ns) / 1e6 - fault_s * 1e3)
            for p in flow.requester.paths if p.abandoned_ns]
    # back within 50 ms, and after that on average: BFD and BGP reconverging on two cores
    # take the switches' engines' CPU now and then, so one later window may dip
    assert after[0] >= floor and sum(after) / len(after) >= floor, (before, after, gone)


def test_validate_runs_its_collectives_as_rdma_writes_over_every_plane(lab, tmp_path):
    """labctl validate --transport metaroce: every payload an RDMA write over fl-rdma, the
    results checked by every rank; at 1 MiB in pairs (the tier the profile judges) the
    all-reduce's bus bandwidth is a quarter or more of the same run's point to point."""
    profile = tmp_path / "rdma.yml"
    profile.write_text("tiers: [2, all]\nsizes: [1MiB]\niterations: 3\n"
                       "collectives: [all_reduce:ring, all_to_all]\n"
                       "p2p: {pairs: 2, pings: 20, stream: 8MiB}\n")
    out = labctl("validate", lab.plan.name, "--transport", "metaroce", "--profile",
                 str(profile), "--json")
    assert out.returncode == 0, out
    found = json.loads(out.stdout)
    assert found["transport"] == "metaroce"
    assert all(r["ok"] for r in found["collectives"])
    ring = next(r for r in found["collectives"]
                if r["tier"] == "2" and r["collective"] == "all_reduce:ring")
    assert ring["busbw_GBps"] >= 0.25 * found["p2p_GBps"], (ring, found["p2p_GBps"])


def test_labctl_rdma_runs_an_incast_and_all_to_all_with_perftests_columns(lab):
    out = labctl("rdma", lab.plan.name, "host1,host2,host4", "host3", "--transport", "roce",
                 "-n", "20", "--size", "16KiB", "--rate", "10mbit", "--json")
    assert out.returncode == 0, out
    found = json.loads(out.stdout)
    assert [(f["src"], f["dst"]) for f in found["flows"]] == \
        [("host1", "host3"), ("host2", "host3"), ("host4", "host3")]
    assert found["perftest"]["#iterations"] == 60 and found["perftest"]["#bytes"] == 16384
    assert found["counters"]["errors"] == 0 and found["counters"]["sent"] >= 60 * 16
    out = labctl("rdma", lab.plan.name, "host1,host2,host3", "--all-to-all", "-n", "10",
                 "--rate", "10mbit", "--json")
    assert out.returncode == 0, out
    assert len(json.loads(out.stdout)["flows"]) == 6
    out = labctl("rdma", lab.plan.name, "host1", "host9")
    assert out.returncode != 0 and "no node 'host9'" in out.stderr
