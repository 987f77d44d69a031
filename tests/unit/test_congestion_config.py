"""From a `qos:` buffer to SAI objects, and the document's buffer rules (no kernel)."""

from __future__ import annotations

import json

import pytest

from harness.nodes.port.nic import nic_ends
from harness.nodes.switch.agent.config import ConfigError, parse
from harness.nodes.switch.render import sai_config
from harness.nodes.switch.sai.headroom import EMULATED_RESPONSE_US, for_km
from harness.topology.pipeline import plan_from_file
from tests.conftest import TOPOLOGIES

SRC = "nodes/leaf1/sai-config.json"
BOUND = {"PORT|eth1", "ROUTER_INTERFACE|eth1", "VIRTUAL_ROUTER|default"}


def test_a_qos_buffer_renders_the_switch_mmu_as_sai_objects() -> None:
    plan = plan_from_file(TOPOLOGIES / "incast.yml")
    document = sai_config(plan, plan.node("leaf1"))
    assert document["BUFFER_POOL|ingress"]["SAI_BUFFER_POOL_ATTR_SIZE"] == 256 * 1024
    lossless = document["BUFFER_PROFILE|lossless-eth1"]
    assert lossless["SAI_BUFFER_PROFILE_ATTR_SHARED_STATIC_TH"] == 30 * 1024
    # a 40 Mbit/s port on a cable of no length: the emulated port's response plus two frames
    assert lossless["SAI_BUFFER_PROFILE_ATTR_XOFF_TH"] == \
        for_km(0, 40_000_000, 1500, EMULATED_RESPONSE_US).bytes
    assert document["PORT|eth5"]["SAI_PORT_ATTR_SPEED"] == 10
    assert document["PORT|eth5"]["SAI_PORT_ATTR_PRIORITY_FLOW_CONTROL"] == 0b1000
    assert document["PORT|eth5"]["SAI_PORT_ATTR_PFC_TC_DLD_INTERVAL"] == [[3, 200]]
    assert document["WRED|lossless"]["SAI_WRED_ATTR_GREEN_MIN_THRESHOLD"] == 10_000
    queues = {k: v for k, v in document.items() if k.startswith("QUEUE|eth5-")}
    assert len(queues) == 8
    assert queues["QUEUE|eth5-3"]["SAI_QUEUE_ATTR_WRED_PROFILE_ID"] == "WRED|lossless"
    assert queues["QUEUE|eth5-3"]["SAI_QUEUE_ATTR_ENABLE_PFC_DLDR"] is True
    assert queues["QUEUE|eth5-0"]["SAI_QUEUE_ATTR_BUFFER_PROFILE_ID"] == "BUFFER_PROFILE|lossy"
    # the document the agent will read is one it accepts
    bound = {f"{t}|eth{i}" for t in ("PORT", "ROUTER_INTERFACE") for i in range(1, 6)}
    assert parse(json.dumps(document, indent=1), SRC, bound | {"VIRTUAL_ROUTER|default"})


def test_a_lab_without_a_buffer_declares_no_mmu_and_runs_no_engine() -> None:
    plan = plan_from_file(TOPOLOGIES / "scaleup-16.yml")
    document = sai_config(plan, plan.node("sw1"))
    assert not any(k.startswith(("QUEUE|", "WRED|", "BUFFER_")) for k in document)
    assert nic_ends(plan) == []


def test_every_host_port_on_a_switch_gets_a_nic_engine() -> None:
    plan = plan_from_file(TOPOLOGIES / "incast.yml")
    assert sorted(str(e) for e in nic_ends(plan)) == \
        ["h1:eth1", "h2:eth1", "h3:eth1", "h4:eth1", "r1:eth1"]


def _document(**profile: object) -> str:
    return json.dumps({
        "BUFFER_POOL|ingress": {"SAI_BUFFER_POOL_ATTR_TYPE": "SAI_BUFFER_POOL_TYPE_INGRESS",
                                "SAI_BUFFER_POOL_ATTR_SIZE": 100_000},
        "BUFFER_PROFILE|lossless": {"SAI_BUFFER_PROFILE_ATTR_POOL_ID": "BUFFER_POOL|ingress",
                                    **profile}}, indent=1)


@pytest.mark.parametrize(("profile", "attribute", "says"), [
    ({"SAI_BUFFER_PROFILE_ATTR_THRESHOLD_MODE": "SAI_BUFFER_POOL_THRESHOLD_MODE_STATIC",
      "SAI_BUFFER_PROFILE_ATTR_SHARED_STATIC_TH": 200_000},
     "SAI_BUFFER_PROFILE_ATTR_SHARED_STATIC_TH", "the static threshold (200000 B) exceeds"),
    ({"SAI_BUFFER_PROFILE_ATTR_RESERVED_BUFFER_SIZE": 60_000,
      "SAI_BUFFER_PROFILE_ATTR_XOFF_TH": 50_000},
     "SAI_BUFFER_PROFILE_ATTR_XOFF_TH", "reserved buffer plus headroom (110000 B) exceeds"),
])
def test_a_threshold_above_its_pool_is_refused_at_its_line(
        profile: dict, attribute: str, says: str) -> None:
    text = _document(**profile)
    with pytest.raises(ConfigError) as caught:
        parse(text, SRC, BOUND)
    line = next(n for n, row in enumerate(text.splitlines(), 1) if attribute in row)
    message = str(caught.value)
    assert message.startswith(f"{SRC}:{line}: BUFFER_PROFILE|lossless {attribute}: {says}")
    assert "give the pool more" in message


@pytest.mark.parametrize(("entry", "says"), [
    ({"INGRESS_PRIORITY_GROUP|eth1-9": {"SAI_INGRESS_PRIORITY_GROUP_ATTR_PORT": "PORT|eth1",
                                        "SAI_INGRESS_PRIORITY_GROUP_ATTR_INDEX": 9}},
     "9 is not an integer in [0, 7]"),
    ({"PORT|eth1": {"SAI_PORT_ATTR_PRIORITY_FLOW_CONTROL": 256}},
     "256 is not an integer in [0, 255]"),
    ({"PORT|eth1": {"SAI_PORT_ATTR_PFC_TC_DLD_INTERVAL": [[8, 200]]}},
     "8 is not an integer in [0, 7]"),
    ({"WRED|w": {"SAI_WRED_ATTR_GREEN_MIN_THRESHOLD": 50, "SAI_WRED_ATTR_GREEN_MAX_THRESHOLD": 40}},
     "MIN_THRESHOLD must be below"),
    ({"QUEUE|eth1-8": {"SAI_QUEUE_ATTR_PORT": "PORT|eth1", "SAI_QUEUE_ATTR_INDEX": 8}},
     "8 is not an integer in [0, 7]"),
])
def test_an_unknown_priority_or_a_bad_wred_is_refused(entry: dict, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(json.dumps(entry, indent=1), SRC, BOUND)
    assert says in str(caught.value) and str(caught.value).startswith(f"{SRC}:")
