"""One lossless RDMA class from the vendors' QoS schemes, undeployed: the shipped profiles
normalize into one DSCP -> TC -> queue scheme, every SAI port gets it as SAI's two maps, and a
profile that contradicts another (or names nothing) is refused at its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.errors import TopologyError
from harness.nodes.switch.render import sai_config
from harness.nodes.switch.sai.queues import classid, dscp_to_queue
from harness.topology.augment import augment
from harness.topology.loader import load_text
from harness.topology.pipeline import plan_from_file
from harness.topology.qos import shipped

LAB = """
name: qoslab
qos:
  profiles: [{profiles}]
{classes}
topology:
  nodes:
    leaf1: {{role: leaf, kind: sai}}
    spine1: {{role: spine, kind: sai}}
    host1: {{role: host, kind: frr}}
  links:
    - endpoints: ["leaf1:eth1", "spine1:eth1"]
      bandwidth: 400Gbit
    - endpoints: ["host1:eth1", "leaf1:eth2"]
"""
VENDORS = ["sonic-broadcom", "nvidia-spectrum", "arista-eos", "cisco-nexus"]


def lab_text(profiles: list[str], classes: str = "") -> str:
    return LAB.format(profiles=", ".join(profiles), classes=classes)


def test_the_shipped_vendors_normalize_into_one_lossless_and_one_cnp_class() -> None:
    assert shipped() == sorted(VENDORS)
    qos = augment(load_text(lab_text(VENDORS))).qos
    assert qos is not None
    # RoCEv2 as SONiC (3, 4), Cisco (24, 26), NVIDIA and Arista (26) mark it; CNP at 48
    assert qos.dscp_to_tc == {3: 3, 4: 3, 24: 3, 26: 3, 48: 6}
    assert qos.tc_to_queue == {0: 0, 3: 3, 6: 6}
    assert qos.ecn == {"min_bytes": 150_000, "max_bytes": 1_536_000, "probability": 100}
    assert qos.profiles == ["SONiC (Broadcom)", "NVIDIA Spectrum", "Arista EOS",
                            "Cisco Nexus 9000"]


def test_every_sai_port_gets_the_two_maps_beside_its_speed() -> None:
    plan = augment(load_text(lab_text(["arista-eos"], "  lossless: {tc: 4, queue: 5}")))
    document = sai_config(plan, plan.node("leaf1"))
    assert document["QOS_MAP|dscp_to_tc"]["SAI_QOS_MAP_ATTR_MAP_TO_VALUE_LIST"] == \
        [[26, 4], [48, 6]]
    assert document["QOS_MAP|tc_to_queue"]["SAI_QOS_MAP_ATTR_MAP_TO_VALUE_LIST"] == \
        [[0, 0], [4, 5], [6, 6]]
    assert document["PORT|eth1"] == {"SAI_PORT_ATTR_SPEED": 400_000,
                                     "SAI_PORT_ATTR_QOS_DSCP_TO_TC_MAP": "QOS_MAP|dscp_to_tc",
                                     "SAI_PORT_ATTR_QOS_TC_TO_QUEUE_MAP": "QOS_MAP|tc_to_queue"}
    assert "SAI_PORT_ATTR_SPEED" not in document["PORT|eth2"]
    assert "QOS_MAP|dscp_to_tc" not in sai_config(
        augment(load_text(lab_text(["arista-eos"]).replace("qos:\n  profiles: [arista-eos]\n",
                                                          ""))), plan.node("leaf1"))


def test_a_port_puts_each_dscp_in_the_queue_of_its_class() -> None:
    assert dscp_to_queue({26: 3, 48: 6, 10: 1}, {3: 5, 6: 6}) == {26: 5, 48: 6, 10: 1}
    assert [classid(q) for q in (0, 3, 7)] == ["5a1:1", "5a1:4", "5a1:8"]


def test_a_dscp_two_profiles_disagree_on_is_refused_in_each_file(tmp_path: Path) -> None:
    (tmp_path / "voice.yml").write_text(
        "vendor: voice gear\n"
        "dscp_to_tc:\n"
        "  26: 2\n"
        "  46: 5\n"
        "tc_to_queue: {0: 0, 2: 2, 5: 5}\n"
        "lossless_tc: [5]\n"
        "ecn: {min_bytes: 100000, max_bytes: 200000, probability: 10}\n")
    (tmp_path / "lab.yml").write_text(lab_text(["nvidia-spectrum", "voice.yml"]))
    with pytest.raises(TopologyError) as caught:
        plan_from_file(tmp_path / "lab.yml")
    text = str(caught.value)
    assert "DSCP 26 is lossless in NVIDIA Spectrum" in text
    assert "best effort in voice gear" in text
    assert f"{tmp_path / 'voice.yml'}:3: dscp_to_tc.26" in text
    assert "nvidia-spectrum.yml:4: dscp_to_tc.26" in text
    assert "fix: leave one of these profiles out" in text


def test_an_unknown_profile_is_refused_at_its_line_with_the_shipped_ones() -> None:
    with pytest.raises(TopologyError) as caught:
        augment(load_text(lab_text(["arista-eos", "juniper"]), "lab.yml"))
    text = str(caught.value)
    assert "lab.yml:4: qos.profiles[1]: no QoS profile 'juniper'" in text
    assert "use one of: arista-eos, cisco-nexus, nvidia-spectrum, sonic-broadcom" in text


def test_a_profile_whose_lossless_class_no_dscp_reaches_is_refused(tmp_path: Path) -> None:
    (tmp_path / "odd.yml").write_text(
        "vendor: odd\ndscp_to_tc: {26: 3}\ntc_to_queue: {3: 3}\nlossless_tc: [4]\n"
        "ecn: {min_bytes: 1, max_bytes: 2, probability: 1}\n")
    (tmp_path / "lab.yml").write_text(lab_text(["odd.yml"]))
    with pytest.raises(TopologyError, match="traffic class 4 is lossless or CNP but no DSCP"):
        plan_from_file(tmp_path / "lab.yml")


def test_the_lossless_and_cnp_classes_need_their_own_queues() -> None:
    with pytest.raises(TopologyError, match="need a traffic class and a queue each"):
        load_text(lab_text(["arista-eos"], "  lossless: {tc: 3, queue: 6}"))


def test_qos_on_a_lab_without_sai_switches_is_refused_at_its_line() -> None:
    with pytest.raises(TopologyError) as caught:
        augment(load_text(lab_text(["arista-eos"]).replace("kind: sai", "kind: frr"), "lab.yml"))
    assert "lab.yml:3: qos: QoS maps are programmed by SAI switches and this lab has none" in \
        str(caught.value)


def test_deploy_is_told_which_ports_an_impaired_link_takes_past_their_queues() -> None:
    text = lab_text(["arista-eos"]).replace("      bandwidth: 400Gbit", "      delay: 1ms")
    notes = augment(load_text(text)).notes
    assert [n for n in notes if n.startswith("qos:")] == [
        "qos: impaired links bypass the queues of leaf1:eth1, spine1:eth1 (their impairment "
        "takes the frames before or instead of the port's queues)"]
    assert not [n for n in augment(load_text(lab_text(["arista-eos"]))).notes
                if n.startswith("qos:")]


def test_with_a_buffer_the_port_queues_before_the_impaired_cable_so_nothing_is_bypassed() -> None:
    text = lab_text(["arista-eos"], "  buffer: 1MiB").replace("      bandwidth: 400Gbit",
                                                              "      delay: 1ms")
    plan = augment(load_text(text))
    assert plan.qos is not None and plan.qos.buffer == 1024 * 1024
    assert not [n for n in plan.notes if n.startswith("qos:")]


def test_a_lab_may_give_its_own_ecn_thresholds_for_its_line_rate() -> None:
    own = "  buffer: 1MiB\n  ecn: {min_bytes: 10000, max_bytes: 40000, probability: 50}"
    qos = augment(load_text(lab_text(["arista-eos"], own))).qos
    assert qos is not None and qos.mark
    assert qos.ecn == {"min_bytes": 10_000, "max_bytes": 40_000, "probability": 50}
    with pytest.raises(TopologyError, match=r"ecn\.min_bytes must be below ecn\.max_bytes"):
        load_text(lab_text(["arista-eos"], "  ecn: {min_bytes: 5, max_bytes: 5, probability: 1}"))
