"""Nodes start only while the host has memory for them (harness/deploy/memory.py): a lab that
shares memory waits for KSM to give some back, and gives up after two scans without any."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.core.errors import LabError
from harness.deploy import memory
from harness.linux import ksm
from harness.topology.pipeline import plan_from_file
from harness.topology.plan import LabPlan
from tests.conftest import TOPOLOGIES

TOTAL_MIB = 10_000  # a reserve of 1,000 MiB


def host(monkeypatch: pytest.MonkeyPatch, available: list[float], scans: list[int]) -> list[str]:
    """Memory available and KSM's full scans as successive reads return them (the last
    repeats); returns what was asked of KSM."""
    def reads(values: list) -> Iterator:
        yield from values
        while True:
            yield values[-1]
    mem, full = reads(available), reads(scans)
    monkeypatch.setattr(ksm, "meminfo_mib", lambda field: {"MemTotal": TOTAL_MIB}[field])
    monkeypatch.setattr(ksm, "mem_available_mib", lambda: next(mem))
    monkeypatch.setattr(ksm, "full_scans", lambda: next(full))
    monkeypatch.setattr(memory, "POLL_S", 0)
    asked: list[str] = []
    monkeypatch.setattr(ksm, "start_merging", lambda holder: asked.append("deploy rate"))
    return asked


def pair(share: bool) -> LabPlan:
    return plan_from_file(TOPOLOGIES / "pair.yml").model_copy(update={"share_memory": share})


def test_a_node_starts_at_once_when_there_is_room(monkeypatch: pytest.MonkeyPatch) -> None:
    host(monkeypatch, [1000 + ksm.MIB_PER_FRR_NODE + 1], [0])
    room = memory.MemoryRoom(pair(share=False), "/labs/pair")
    room.wait(room.plan.node("r1"))
    assert room.started == 1


def test_without_sharing_a_full_host_fails_at_once_saying_how_to_fix_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    host(monkeypatch, [900], [0])
    room = memory.MemoryRoom(pair(share=False), "/labs/pair")
    with pytest.raises(LabError) as err:
        room.wait(room.plan.node("r1"))
    message = str(err.value)
    assert "does not fit this host's memory" in message and "--share-memory on" in message
    assert "before starting r1 (0 of 2 nodes started) 900 MiB were available" in message
    assert "1000 MiB kept free" in message and "--node-filter" in message


def test_a_shared_lab_waits_while_ksm_gives_memory_back(monkeypatch: pytest.MonkeyPatch) -> None:
    # ten scans pass while it waits, but memory keeps coming back
    asked = host(monkeypatch, [900, 900, 950, 1000, 1040, 1100], [0, 0, 3, 6, 9, 10])
    room = memory.MemoryRoom(pair(share=True), "/labs/pair")
    room.wait(room.plan.node("r2"))
    assert room.started == 1
    assert asked == ["deploy rate"]  # whatever rate another lab left ksmd at


def test_a_shared_lab_gives_up_after_two_scans_without_memory_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    host(monkeypatch, [900, 900, 920, 920, 920, 920], [0, 0, 1, 1, 2, 3])
    room = memory.MemoryRoom(pair(share=True), "/labs/pair")
    with pytest.raises(LabError, match="even shared: KSM merged nothing more over two full"):
        room.wait(room.plan.node("r1"))
