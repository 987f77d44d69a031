"""The platform layer on the default Clos's SAI switches: inventory and diagnostics as built,
a failed fan raising a thermal alarm in inspect, an overheated ASIC shutting its switch's ports
through SAI while the fabric routes around it (and back once it cools), and the SAI SDK
flashed with the agent restarted warm under a flow that loses nothing."""

from __future__ import annotations

import json
import time

import pytest

from harness.core.events import Event, read
from harness.core.wait import wait_until
from harness.deploy.converge import wait_converged
from harness.deploy.lab import Lab
from harness.nodes.switch.agent.client import ask
from harness.testing import plan_from
from harness.testing.chaos import labctl
from tests.conftest import TOPOLOGIES

pytestmark = pytest.mark.e2e

NAME = "e2eplatform"
RATE = 2000


@pytest.fixture(scope="module")
def topology():
    return plan_from(TOPOLOGIES / "clos.yml", name=NAME)


def platform(*args: str) -> str:
    out = labctl("platform", *args)
    assert out.returncode == 0, out
    return out.stdout


def show(node: str) -> dict:
    return json.loads(platform(f"{NAME}/{node}", "show", "--json"))


def inspected(node: str) -> dict:
    rows = json.loads(labctl("inspect", NAME, "--json").stdout)["nodes"]
    return next(r for r in rows if r["node"] == node)


def ports_up(lab: Lab, node: str) -> dict[str, bool]:
    links = json.loads(lab.node(node).cmd("ip", "-j", "link", "show").stdout)
    return {link["ifname"]: "UP" in link["flags"] for link in links if link["ifname"] != "lo"}


def test_a_switch_shows_its_inventory_and_passes_its_diagnostics(lab: Lab) -> None:
    shown = show("leaf1")
    assert sorted(shown["optics"]) == sorted(i.name for i in lab.plan.node("leaf1").interfaces)
    assert [d["test"] for d in shown["diagnostics"] if not d["ok"]] == []
    assert shown["alarms"] == [] and shown["firmware"]["sai-sdk"]
    assert inspected("leaf1")["platform"] == "linux"


def test_a_failed_fan_raises_a_thermal_alarm_in_inspect(lab: Lab) -> None:
    platform(f"{NAME}/leaf2", "fail", "fan", "fan2")
    try:
        row = inspected("leaf2")
        assert row["state"] == "degraded" and "fan2 failed" in row["sai"], row
        assert show("leaf2")["leds"]["fan"] == "amber"
    finally:
        platform(f"{NAME}/leaf2", "set", "fan", "fan2", "ok")
    assert inspected("leaf2")["state"] == "running"


def test_an_overheated_asic_shuts_its_ports_and_the_fabric_routes_around(lab: Lab,
                                                                        traffic) -> None:
    """The event record says it in order: the platform's alarm, then spine1's ports going
    down, then the alarm cleared and the ports back."""
    began = time.time()
    platform(f"{NAME}/spine1", "fail", "sensor", "asic", "--celsius", "110")
    try:
        assert not any(ports_up(lab, "spine1").values()), ports_up(lab, "spine1")
        spine1 = lab.plan.node("spine1").interfaces[0].ipv4.split("/")[0]
        states = lab.frr("leaf1").bgp_peer_states()
        assert states[spine1] != "Established", states
        result = traffic.flow("host1", "host2", count=2_000, rate_pps=RATE)
        assert result.lost == 0, "spine2 carries it all"
        assert "past critical" in inspected("spine1")["sai"]
    finally:
        platform(f"{NAME}/spine1", "set", "sensor", "asic", "auto")
    assert all(ports_up(lab, "spine1").values())
    wait_converged(lab, 60)
    ports = {i.name for i in lab.plan.node("spine1").interfaces}

    def said(events: list[Event]) -> bool:
        return {e.detail["port"] for e in events if (e.kind, e.what) == ("link", "up")} >= ports
    events = wait_until(lambda: [e for e in read(lab.dir) if e.t >= began and
                                 e.node == "spine1"], 10, until=said, every=0.5)
    alarms = [(e.what, e.detail["alarm"]) for e in events if e.kind == "alarm"]
    assert alarms == [("raised", "sensor asic critical"), ("cleared", "sensor asic critical")]
    raised, cleared = (e.t for e in events if e.kind == "alarm")
    downs = [e for e in events if (e.kind, e.what) == ("link", "down")]
    assert {e.detail["port"] for e in downs} == ports
    assert raised <= min(e.t for e in downs) and max(e.t for e in downs) < cleared


def test_flashing_the_sai_sdk_restarts_the_agent_warm_without_loss(lab: Lab, traffic) -> None:
    before = ask(lab.node_dir("leaf1"), {"cmd": "status"})["pid"]
    result = traffic.flow("host1", "host2", count=6_000, rate_pps=RATE, actions=[
        (1.0, "flash", lambda: platform(f"{NAME}/leaf1", "firmware", "sai-sdk", "fl-2.0"))])
    assert ask(lab.node_dir("leaf1"), {"cmd": "status"})["pid"] != before
    assert show("leaf1")["firmware"]["sai-sdk"] == "fl-2.0"
    print(f"sai-sdk flashed on leaf1 under {RATE} packets/s: {result.lost} of "
          f"{result.sent} lost")
    assert result.sent == 6_000 and result.lost == 0, result
