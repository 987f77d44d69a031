"""Congestion in a deployed lab of SAI switches (topologies/incast.yml): the `qos:` buffer
becomes SAI buffer, queue, WRED and PFC objects in the switch's configuration document, the
agent programs fl-port from them, the hosts' NICs honour PAUSE, and `labctl sai counters`
reads the result. Four hosts at 40 Mbit/s send into one at 10 Mbit/s.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from harness.core.wait import wait_until
from harness.deploy.lab import Lab
from harness.faults.injector import Faults
from harness.nodes.switch.agent.client import ask
from harness.topology.plan import Endpoint
from harness.traffic.burst import ROCE_PORT, SEND
from harness.traffic.incast import incast
from tests.e2e.conftest import deploy

pytestmark = pytest.mark.e2e

NAME = "e2eincast"
SENDERS = [Endpoint(node=f"h{i}", iface="eth1") for i in range(1, 5)]
RECEIVER = Endpoint(node="r1", iface="eth1")
LOSSLESS_DSCP, LOSSLESS = 3, 3  # sonic-broadcom's RoCE marking, the lab's lossless TC/queue
BURST = 300
# each sender at a quarter over its 40 Mbit/s line rate (1466 B on the wire): its NIC queues
# the rest, as an RDMA NIC does with what it is given; blasting would only load the CPU
PACED = 1.25 * 40_000_000 / (1466 * 8)


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    lab = deploy("incast.yml", NAME)
    yield lab
    lab.destroy()


def counters(lab: Lab) -> dict[str, dict[str, Any]]:
    rows = ask(lab.frr("leaf1").workdir, {"cmd": "counters"})
    return {row["name"]: row for row in rows}


def lossless_queue(row: dict[str, Any]) -> dict[str, int]:
    return next(q for q in row["queues"] if q["queue"] == LOSSLESS)


def test_the_document_declares_the_buffer_and_the_agent_programs_the_port_engine(
        lab: Lab) -> None:
    document = json.loads((lab.frr("leaf1").workdir / "sai-config.json").read_text())
    assert document["BUFFER_POOL|ingress"]["SAI_BUFFER_POOL_ATTR_SIZE"] == 256 * 1024
    assert document["PORT|eth1"]["SAI_PORT_ATTR_PRIORITY_FLOW_CONTROL"] == 1 << LOSSLESS
    assert document["QUEUE|eth5-3"]["SAI_QUEUE_ATTR_WRED_PROFILE_ID"] == "WRED|lossless"
    rows = counters(lab)
    assert {r["queues"][0]["qdisc"] for r in rows.values()} == {"fl-port"}
    assert all(r["pool"]["size"] == 256 * 1024 for r in rows.values())


def test_incast_loses_nothing_pauses_the_senders_and_marks_ce(lab: Lab) -> None:
    before = counters(lab)
    burst = incast(lab, SENDERS, RECEIVER, BURST, dscp=LOSSLESS_DSCP, pps=PACED)
    after = counters(lab)
    assert burst.lost == 0, burst.received
    queue = lossless_queue(after["eth5"])
    assert queue["SAI_QUEUE_STAT_DROPPED_PACKETS"] == 0
    sent = queue["SAI_QUEUE_STAT_PACKETS"] - lossless_queue(before["eth5"])[
        "SAI_QUEUE_STAT_PACKETS"]
    assert sent == len(SENDERS) * BURST
    marked = queue["SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS"] - lossless_queue(before["eth5"])[
        "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS"]
    assert burst.ce == marked > 0
    for i, sender in enumerate(SENDERS, start=1):
        key = f"SAI_PORT_STAT_PFC_{LOSSLESS}_TX_PKTS"
        pauses = after[f"eth{i}"]["stats"][key] - before[f"eth{i}"]["stats"][key]
        assert pauses > 0
        assert burst.pauses_on_wire[sender.node] == pauses  # tcpdump on the host's link


def test_a_warm_agent_restart_keeps_buffers_pfc_and_counters(lab: Lab) -> None:
    from tests.e2e.test_sai_lab import labctl
    before = counters(lab)
    assert labctl("sai", f"{NAME}/leaf1", "restart").returncode == 0
    kept = counters(lab)
    for name, row in before.items():
        assert lossless_queue(kept[name])["SAI_QUEUE_STAT_PACKETS"] == \
            lossless_queue(row)["SAI_QUEUE_STAT_PACKETS"]
        assert kept[name]["stats"][f"SAI_PORT_STAT_PFC_{LOSSLESS}_TX_PKTS"] == \
            row["stats"][f"SAI_PORT_STAT_PFC_{LOSSLESS}_TX_PKTS"]
    burst = incast(lab, SENDERS, RECEIVER, BURST, dscp=LOSSLESS_DSCP, pps=PACED)
    assert burst.lost == 0, burst.received
    assert sum(burst.pauses_on_wire.values()) > 0


def test_a_pfc_storm_from_a_host_is_found_drained_and_restored_by_the_watchdog(
        lab: Lab) -> None:
    """r1's NIC pauses its switch port without end; frames for r1 wait in the lossless
    queue until the watchdog (200 ms, topologies/incast.yml) drains them, and the port is
    taken back 400 ms after the storm ends."""
    before = lossless_queue(counters(lab)["eth5"])
    faults = Faults(lab)
    storm = faults.pfc_storm("r1:eth1")
    try:
        lab.node("h1").cmd(sys.executable, "-c", SEND, lab.plan.node("h1").loopback4 or "",
                           lab.plan.node("r1").loopback4 or "", str(ROCE_PORT), "50", "1000",
                           str(LOSSLESS_DSCP << 2), str(PACED), check=True)  # none arrives
        found = wait_until(lambda: lossless_queue(counters(lab)["eth5"]), 5.0, every=0.1,
                           until=lambda q: q["PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED"] >
                           before["PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED"])
        assert found["PFC_WD_QUEUE_STATS_TX_DROPPED_PACKETS"] > \
            before["PFC_WD_QUEUE_STATS_TX_DROPPED_PACKETS"]
    finally:
        faults.undo(storm)
    wait_until(lambda: lossless_queue(counters(lab)["eth5"]), 5.0, every=0.1,
               until=lambda q: q["PFC_WD_QUEUE_STATS_DEADLOCK_RESTORED"] >
               before["PFC_WD_QUEUE_STATS_DEADLOCK_RESTORED"])
    events = (lab.frr("leaf1").workdir / "port.log").read_text()
    assert "pfc_storm_detected port=eth5 queue=3 action=drop" in events
    assert "pfc_storm_restored port=eth5 queue=3" in events
    burst = incast(lab, SENDERS, RECEIVER, BURST, dscp=LOSSLESS_DSCP, pps=PACED)
    assert burst.lost == 0, burst.received  # lossless again once restored
