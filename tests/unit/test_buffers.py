"""The lossless class's buffers from measured cables (agent/buffers.py, agent/cable.py) on the
fake backend: a first measurement makes the pool, the port's profile and its priority group;
a new one is one set; a new agent over the same node directory makes the same again."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.nodes.switch.agent.buffers import LOSSLESS_PG, BufferOrch
from harness.nodes.switch.agent.cable import Measurement, far_end
from harness.nodes.switch.sai.api import SaiSwitch
from harness.nodes.switch.sai.fake import FakeBackend
from harness.nodes.switch.sai.headroom import Headroom
from harness.nodes.switch.sai.types import ObjectType

T = ObjectType
SPEED_MBPS = 400_000


def switch() -> tuple[SaiSwitch, int]:
    sai = SaiSwitch(FakeBackend())
    _, port = sai.create(T.PORT, {"SAI_PORT_ATTR_HW_LANE_LIST": [5],
                                  "SAI_PORT_ATTR_SPEED": SPEED_MBPS})
    return sai, port  # type: ignore[return-value]


def test_the_far_end_of_a_31() -> None:
    assert far_end("10.1.0.4/31") == "10.1.0.5" and far_end("10.1.0.5/31") == "10.1.0.4"
    with pytest.raises(ValueError, match="not on a /31"):
        far_end("10.1.0.5/30")


def test_a_measured_cable_becomes_the_ports_lossless_headroom(tmp_path: Path) -> None:
    sai, port = switch()
    orch = BufferOrch(sai, tmp_path)
    forty = Measurement("eth1", "10.1.0.5", one_way_us=196.0, answered=20)
    row = orch.apply(forty, port)
    expected = Headroom(196.0, SPEED_MBPS * 1_000_000).bytes
    assert row["headroom_bytes"] == expected and row["status"] == "SAI_STATUS_SUCCESS"
    (profile,) = sai.objects(T.BUFFER_PROFILE).values()
    (group,) = sai.objects(T.INGRESS_PRIORITY_GROUP).values()
    assert profile.xoff_th == expected  # type: ignore[attr-defined]
    assert (group.port, group.index) == (port, LOSSLESS_PG)  # type: ignore[attr-defined]
    orch.apply(Measurement("eth1", "10.1.0.5", one_way_us=490.0, answered=20), port)
    (profile,) = sai.objects(T.BUFFER_PROFILE).values()  # moved, not made again
    assert profile.xoff_th == Headroom(490.0, SPEED_MBPS * 1_000_000).bytes  # type: ignore[attr-defined]

    again, port_again = switch()  # a warm restart: a new agent, the same node directory
    BufferOrch(again, tmp_path).restore({"eth1": port_again})
    (restored,) = again.objects(T.BUFFER_PROFILE).values()
    assert restored.xoff_th == profile.xoff_th  # type: ignore[attr-defined]
    assert again.count(T.INGRESS_PRIORITY_GROUP) == 1
