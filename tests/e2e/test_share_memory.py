"""A lab that shares its memory (harness/linux/ksm.py) beside one that does not: every process
of the first starts mergeable, without address-space randomisation and with Python's fixed hash
seed, none of the second's does; KSM merges most of the first's daemons' pages; and the host's
KSM settings come back when the last lab that shares memory is destroyed."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.core.wait import wait_until
from harness.deploy.lab import Lab
from harness.linux import hostwide, ksm
from harness.testing.footprint import command
from harness.testing.hoststate import ksm_state
from harness.testing.plugin import RUNTIME
from harness.topology.pipeline import plan_from_file
from tests.conftest import TOPOLOGIES

pytestmark = pytest.mark.skipif(RUNTIME == "docker", reason="the docker runtime cannot share "
                                "memory (DockerRuntime.cannot_share_memory)")
ADDR_NO_RANDOMIZE = 0x0040000
PAGE = 4096


@pytest.fixture(scope="module")
def host_before() -> dict[str, object]:
    return ksm_state()


@pytest.fixture(scope="module")
def labs(host_before: dict[str, object]) -> Iterator[tuple[Lab, Lab]]:
    shared = Lab(plan_from_file(TOPOLOGIES / "sai-fabric.yml", "e2eksm"), RUNTIME, "on")
    plain = Lab(plan_from_file(TOPOLOGIES / "pair.yml", "e2eksmoff"), RUNTIME, "off")
    try:
        for lab in (shared, plain):
            lab.deploy(timeout=150)
        yield shared, plain
    finally:
        shared.destroy()
        plain.destroy()


def status(pid: int) -> tuple[int, dict[str, object], bytes]:
    """A process's personality, KSM state and environment."""
    proc = Path(f"/proc/{pid}")
    stat = {key.rstrip(":"): value.strip() for key, value in
            (line.split(None, 1) for line in (proc / "ksm_stat").read_text().splitlines())}
    return int((proc / "personality").read_text(), 16), stat, (proc / "environ").read_bytes()


def processes(lab: Lab) -> list[int]:
    pids = [pid for node in lab.node_names for pid in lab.runtime.node_processes(node)]
    assert pids, f"{lab.plan.name} runs nothing"
    return pids


def test_the_plan_says_which_lab_shares(labs: tuple[Lab, Lab]) -> None:
    shared, plain = labs
    assert Lab.open(shared.plan.name).plan.share_memory is True
    assert Lab.open(plain.plan.name).plan.share_memory is False
    assert any(note.startswith("memory shared (KSM)") for note in shared.plan.notes)


def test_every_process_of_the_shared_lab_and_none_of_the_other_runs_mergeable(
        labs: tuple[Lab, Lab]) -> None:
    shared, plain = labs
    pythons = 0
    for pid in processes(shared):
        persona, stat, environ = status(pid)
        assert persona & ADDR_NO_RANDOMIZE, (pid, command(pid))
        assert stat["ksm_merge_any"] == "yes", (pid, command(pid))
        if command(pid).startswith("harness."):
            pythons += 1
            assert b"\0PYTHONHASHSEED=0\0" in b"\0" + environ, (pid, command(pid))
    assert pythons >= 4  # the four switches' agents
    for pid in processes(plain):
        persona, stat, _ = status(pid)
        assert not persona & ADDR_NO_RANDOMIZE, (pid, command(pid))
        assert stat["ksm_merge_any"] == "no", (pid, command(pid))
    assert ksm_state()["run"] == "1"
    assert ksm_state()["ksmd"] == [(os.SCHED_FIFO, ksm.KSMD_PRIORITY)]


def test_ksm_merges_most_of_the_bgpds_within_a_few_scans(labs: tuple[Lab, Lab]) -> None:
    """ksmd merges a page on the second scan that finds it unchanged; a scan of all mergeable
    memory takes (its pages / pages_to_scan) wake-ups of sleep_millisecs each. Measured:
    ~80% of an idle bgpd's pages merge (its command graph, its northbound tree); one still
    busy with its sessions can be below half for a while, so the bound is on them all."""
    shared, _ = labs
    pids = processes(shared)
    anon = {pid: anonymous_pages(pid) for pid in pids}
    wake_s = int((ksm.KSM / "sleep_millisecs").read_text()) / 1000
    assert int((ksm.KSM / "pages_to_scan").read_text()) == ksm.IDLE_PAGES_TO_SCAN  # deployed
    scan_s = sum(anon.values()) / ksm.IDLE_PAGES_TO_SCAN * wake_s
    timeout = max(10.0, 6 * scan_s)  # three scans, at half speed under load
    bgpds = [pid for pid in pids if command(pid) == "bgpd"]
    assert len(bgpds) == len(shared.node_names)
    def enough(merged: dict[int, int]) -> bool:
        return sum(merged.values()) >= sum(anon[pid] for pid in bgpds) / 2 and all(merged.values())

    def merged() -> dict[int, int]:
        return {pid: int(status(pid)[1]["ksm_merging_pages"]) for pid in bgpds}

    wait_until(merged, timeout, lambda last: AssertionError(
        f"merged pages of each bgpd {last} against its anonymous pages "
        f"{ {pid: anon[pid] for pid in bgpds} }"), every=0.5, until=enough)


def anonymous_pages(pid: int) -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Anonymous:"):
            return int(line.split()[1]) * 1024 // PAGE
    return 0


def test_the_host_settings_come_back_with_the_last_shared_lab(
        labs: tuple[Lab, Lab], host_before: dict[str, object]) -> None:
    shared, plain = labs
    assert hostwide.holders(ksm.setting()) == [str(shared.dir)]  # the plain lab holds nothing
    shared.destroy()
    assert ksm_state() == host_before
    assert hostwide.holders(ksm.setting()) == []
    assert processes(plain)  # the other lab is left as it was
