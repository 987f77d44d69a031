"""The platform model's thermal policy and alarms, without a lab: what a failed fan, a pulled
PSU and an overheated sensor do to the readings, fans, LEDs and alarms."""

from __future__ import annotations

import pytest

from harness.nodes.switch.platform.lifecycle import initial
from harness.nodes.switch.platform.model import (
    ASIC_RISE_PER_LOST_FAN_C,
    MAX_RPM,
    from_dict,
)
from harness.topology.pipeline import plan_from_file
from tests.conftest import TOPOLOGIES

POD = plan_from_file(TOPOLOGIES / "scaleup-16.yml")


@pytest.fixture
def state():
    return initial(POD.name, POD.node("sw1"))


def test_a_new_switch_is_quiet_and_its_inventory_matches_its_cabling(state) -> None:
    assert state.alarms() == [] and state.leds["system"] == "green"
    assert len(state.optics) == 16 and {o["type"] for o in state.optics.values()} == \
        {"OSFP 2x400G-DR4"}
    assert (state.platform, state.asic) == ("tahan", "Tomahawk 5")
    assert initial(POD.name, POD.node("sw1")).serial == state.serial  # same on every deploy
    assert initial(POD.name, POD.node("sw2")).serial != state.serial


def test_a_failed_fan_runs_the_others_flat_out_and_warms_the_asic(state) -> None:
    asic = state.sensor("asic").celsius
    state.fan("fan2").ok = False
    state.step(500)
    assert [f.rpm for f in state.fans] == [MAX_RPM, 0, MAX_RPM, MAX_RPM]
    assert state.sensor("asic").celsius == asic + ASIC_RISE_PER_LOST_FAN_C
    assert state.alarms() == [f"fan2 failed: the others run at {MAX_RPM} rpm"]
    assert (state.leds["fan"], state.leds["system"]) == ("amber", "amber")
    assert state.overheated() == []


def test_a_pulled_psu_leaves_one_carrying_the_load(state) -> None:
    state.psu("psu1").present = False
    state.step(600)
    assert [p.watts for p in state.psus] == [0.0, 600.0]
    assert state.alarms() == ["psu1 absent: no PSU redundancy"] and state.powered


def test_a_sensor_past_critical_is_overheated_until_it_cools(state) -> None:
    state.sensor("asic").forced = 110.0
    state.step()
    assert [s.name for s in state.overheated()] == ["asic"]
    assert state.leds["system"] == "red"
    assert state.alarms() == ["asic 110 C past critical 105 C: ports shut down"]
    state.sensor("asic").forced = None
    state.step()
    assert state.overheated() == [] and state.alarms() == []


def test_the_state_survives_its_file(state) -> None:
    state.fan("fan3").ok = False
    state.step()
    again = from_dict(state.to_dict())
    assert again == state
    with pytest.raises(ValueError, match="no fan 'fan9'; there are fan1, fan2, fan3, fan4"):
        state.fan("fan9")
