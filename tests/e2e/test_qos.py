"""One lossless RDMA class across vendors, on real queues: RoCEv2 packets (UDP 4791 with a
BTH) marked the way each vendor profile marks them cross the SAI fabric, and every hop's queue
counters (HTB classes in the kernel, read through SAI) show each one in the lossless queue,
CNPs in theirs, and other traffic elsewhere."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.deploy.lab import Lab, deploy
from harness.nodes.switch.kind import restart_agent
from harness.testing.plugin import RUNTIME
from harness.testing.queues import queue_packets, sent_per_queue
from harness.topology.augment import augment
from harness.topology.loader import load_text
from harness.topology.qos import SHIPPED, load_profile, shipped
from harness.traffic.roce import CNP, roce_packet, send_from

pytestmark = pytest.mark.e2e

TOPOLOGY = """
name: qosfab
qos:
  profiles: [{profiles}]
topology:
  defaults: {{kind: frr}}
  nodes:
    spine1: {{role: spine, kind: sai}}
    spine2: {{role: spine, kind: sai}}
    leaf1: {{role: leaf, kind: sai}}
    leaf2: {{role: leaf, kind: sai}}
    host1: {{role: host}}
    host2: {{role: host}}
  links:
    - endpoints: ["leaf1:eth1", "spine1:eth1"]
    - endpoints: ["leaf1:eth2", "spine2:eth1"]
    - endpoints: ["leaf2:eth1", "spine1:eth2"]
    - endpoints: ["leaf2:eth2", "spine2:eth2"]
    - endpoints: ["host1:eth1", "leaf1:eth3"]
    - endpoints: ["host2:eth1", "leaf2:eth3"]
"""
# host1 -> host2 crosses three egress ports in turn: a leaf1 uplink, a spine's port to leaf2
# (ECMP picks which), leaf2's port to host2. Each hop is the set of ports it may leave by.
HOPS = {"leaf1 uplinks": [("leaf1", "eth1"), ("leaf1", "eth2")],
        "spines to leaf2": [("spine1", "eth2"), ("spine2", "eth2")],
        "leaf2 to host2": [("leaf2", "eth3")]}
EACH = 100  # packets per marking
BEST_EFFORT = (0, 10, 46)  # unmarked, AF11, EF: no profile's lossless or CNP class here


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    lab = deploy(augment(load_text(TOPOLOGY.format(profiles=", ".join(shipped())))),
                 runtime=RUNTIME, timeout=90)
    yield lab
    lab.destroy()


def rdma_markings() -> dict[str, set[int]]:
    """Each vendor -> the DSCPs its NICs send RoCEv2 with: those of its lossless classes."""
    found = {}
    for name in shipped():
        profile = load_profile(SHIPPED / f"{name}.yml").profile
        found[profile.vendor] = {d for d, tc in profile.dscp_to_tc.items()
                                 if tc in profile.lossless_tc}
    return found


def test_every_vendors_rdma_marking_rides_the_one_lossless_queue_at_every_hop(lab) -> None:
    qos = lab.plan.qos
    assert qos is not None
    lossless, cnp = qos.tc_to_queue[qos.lossless_tc], qos.tc_to_queue[qos.cnp_tc]
    src, dst = lab.plan.node("host1").loopback4, lab.plan.node("host2").loopback4
    markings = rdma_markings()
    assert len({frozenset(d) for d in markings.values()}) > 1, "the vendors mark differently"
    rdma = [roce_packet(src, dst, dscp, qp=qp, psn=psn)
            for qp, dscp in enumerate(sorted(set().union(*markings.values())), start=1)
            for psn in range(EACH)]
    cnps = [roce_packet(src, dst, 48, opcode=CNP, psn=psn) for psn in range(EACH)]
    other = [roce_packet(src, dst, dscp, psn=psn) for dscp in BEST_EFFORT for psn in range(EACH)]
    before = {hop: queue_packets(lab, ports) for hop, ports in HOPS.items()}
    send_from(lab.runtime.netns_path("host1"), rdma + cnps + other)
    after = {hop: queue_packets(lab, ports) for hop, ports in HOPS.items()}
    for hop in HOPS:
        assert set(after[hop]) == set(range(8)), f"{hop}: eight kernel queues"
        sent = sent_per_queue(before[hop], after[hop])
        # nothing else on these ports is marked lossless: the queue holds exactly our packets
        assert sent[lossless] == len(rdma), (hop, sent)
        assert sent[cnp] >= len(cnps), (hop, sent)  # BGP and BFD (CS6, DSCP 48) share it
        assert sent[0] >= len(other), (hop, sent)
        assert all(sent[q] == 0 for q in range(8) if q not in (0, lossless, cnp)), (hop, sent)


def test_a_warm_restart_keeps_the_queues_and_their_counts(lab) -> None:
    """The new agent finds its HTB in place (HTB cannot be changed, only replaced, which
    would drop what is queued and zero the counters): it keeps it and maps the ports again."""
    qos = lab.plan.qos
    lossless = qos.tc_to_queue[qos.lossless_tc]
    src, dst = lab.plan.node("host1").loopback4, lab.plan.node("host2").loopback4
    to_host2 = HOPS["leaf2 to host2"]
    before = queue_packets(lab, to_host2)
    assert before[lossless] > 0, "the first test's packets"
    restart_agent(lab, "leaf2")
    kept = queue_packets(lab, to_host2)
    assert kept[lossless] == before[lossless], "counters carried over, not zeroed"
    send_from(lab.runtime.netns_path("host1"),
              [roce_packet(src, dst, 26, psn=psn) for psn in range(EACH)])
    assert sent_per_queue(kept, queue_packets(lab, to_host2))[lossless] == EACH
