"""The Tahan-like scale-up pod (topologies/scaleup-16.yml: 16 accelerators, 4 switches on the
tahan platform): non-blocking as built, every accelerator pair reachable over IPv6 through
every switch, RDMA in the one lossless queue whichever switch carries it, and a switch failure
leaves every pair reachable through the other three with a quarter of the pod's paths lost,
steered around within the probes' detect time."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from itertools import permutations

import pytest

from harness.deploy.lab import Lab
from harness.nodes.switch.agent.client import ask
from harness.spray.nic import all_planes, planes_to_hosts, wait_spray
from harness.testing import plan_from
from harness.testing.chaos import labctl
from harness.testing.load import WakeupLateness
from harness.testing.queues import queue_packets, sent_per_queue
from harness.testing.steering import assert_probes_steered
from harness.topology.schema import Role
from harness.traffic.roce import roce_packet, send_from
from tests.conftest import TOPOLOGIES

pytestmark = pytest.mark.e2e

RATE = 2000
FILE = TOPOLOGIES / "scaleup-16.yml"


@pytest.fixture(scope="module")
def topology():
    return plan_from(FILE, name="scaleup-e2e")


def accelerators(lab: Lab) -> list[str]:
    return [n.name for n in lab.plan.nodes if n.role is Role.host]


def silent_pairs(lab: Lab) -> list[tuple[str, str]]:
    """Ordered pairs whose IPv6 ping gets no answer (each source pings its 15 in turn)."""
    def from_one(src: str) -> list[tuple[str, str]]:
        silent = []
        for dst in accelerators(lab):
            if dst != src and lab.runtime.run(src, ["ping", "-6", "-c", "1", "-W", "1", "-q",
                                                    lab.plan.node(dst).loopback6]).returncode:
                silent.append((src, dst))
        return silent

    with ThreadPoolExecutor(max_workers=8) as pool:
        return [pair for found in pool.map(from_one, accelerators(lab)) for pair in found]


def paths(lab: Lab) -> int:
    """Switches each accelerator sprays to each other over, summed over ordered pairs."""
    return sum(len(planes) for src in accelerators(lab)
               for planes in planes_to_hosts(lab, src).values())


def test_the_pod_is_non_blocking_on_its_platform(lab: Lab) -> None:
    checked = labctl("validate", "-t", str(FILE))
    assert checked.returncode == 0 and "non-blocking: each accelerator pair has one equal " \
        "path through each of 4 switches" in checked.stdout, checked
    rows = {r["node"]: r for r in json.loads(labctl("inspect", lab.plan.name,
                                                    "--json").stdout)["nodes"]}
    for switch in ("sw1", "sw2", "sw3", "sw4"):
        assert rows[switch]["sai"].startswith("tahan: ") and "16x800G" in rows[switch]["sai"]
        status = ask(lab.node_dir(switch), {"cmd": "status"})
        assert status["capacity"]["name"] == "tahan"
        assert status["capacity"]["port_speed"] == 800_000


def test_every_pair_is_reachable_over_ipv6_through_every_switch(lab: Lab) -> None:
    assert silent_pairs(lab) == []
    n = len(accelerators(lab))
    assert paths(lab) == n * (n - 1) * 4


def test_rdma_between_accelerators_rides_the_lossless_queue_of_whichever_switch(lab) -> None:
    """RoCEv2 over IPv6 at each vendor's marking from acc1 to acc2, whichever switch the
    NIC sprays it through: the switches' ports to acc2 count it all in the lossless queue."""
    qos = lab.plan.qos
    lossless = qos.tc_to_queue[qos.lossless_tc]
    src, dst = lab.plan.node("acc1").loopback6, lab.plan.node("acc2").loopback6
    marks = sorted(d for d, tc in qos.dscp_to_tc.items() if tc == qos.lossless_tc)
    rdma = [roce_packet(src, dst, dscp, qp=qp, psn=psn)
            for qp, dscp in enumerate(marks, start=1) for psn in range(100)]
    to_acc2 = [(s.name, next(i.name for i in s.interfaces if i.peer.node == "acc2"))
               for s in lab.plan.nodes if s.role is Role.scaleup]
    before = queue_packets(lab, to_acc2)
    send_from(lab.runtime.netns_path("acc1"), rdma)
    sent = sent_per_queue(before, queue_packets(lab, to_acc2))
    assert sent[lossless] == len(rdma), sent


def test_a_switch_failure_leaves_every_pair_reachable_through_the_others(lab: Lab, faults,
                                                                          traffic) -> None:
    n = len(accelerators(lab))
    before = paths(lab)
    with WakeupLateness() as load:
        result = traffic.flow("acc1", "acc16", count=6_000, rate_pps=RATE,
                              actions=[(1.0, "sw2 crash", lambda: faults.node_crash("sw2"))])
    assert 0 < result.lost < result.sent / 4, result  # sw2's share, only briefly
    assert set(result.per_plane_after_outage) == {0, 2, 3}
    assert_probes_steered(lab, faults, result, load, RATE)
    hosts = accelerators(lab)
    wait_spray(lab, {(a, b): all_planes(lab, a) - {1} for a, b in permutations(hosts, 2)})
    assert silent_pairs(lab) == []
    lost_share = 1 - paths(lab) / before
    print(f"sw2 crashed: flow outage {result.outage_ms:.1f} ms ({result.lost} of "
          f"{result.sent} lost); paths {before} -> {paths(lab)}: {lost_share:.2%} lost; "
          f"all {n * (n - 1)} ordered pairs answer")
    assert lost_share == 1 / 4
