"""When a lab shares its memory, and KSM's host switches: saved once by the first lab that
shares, put back only when the last one is gone (harness/linux/ksm.py), on a fake sysfs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.core.errors import LabError
from harness.linux import ksm
from harness.topology.pipeline import plan_from_file
from harness.topology.plan import LabPlan
from tests.conftest import TOPOLOGIES

KSMD_PID = 4242


class FakeKsmd:
    """ksmd's scheduling as the kernel would keep it: SCHED_OTHER until told otherwise."""

    def __init__(self) -> None:
        self.policy = {KSMD_PID: (0, 0)}
        self.ksmd = ksm.Ksmd(pids=lambda: [KSMD_PID], get=lambda pid: self.policy[pid],
                             set=lambda pid, policy, prio: self.policy.update({pid: (policy,
                                                                                     prio)}))


@pytest.fixture
def fpf_mini() -> LabPlan:
    return plan_from_file(TOPOLOGIES / "fpf-mini.yml")  # 28 FRR nodes: ~1.5 GiB unshared


@pytest.fixture
def fpf_64() -> LabPlan:
    return plan_from_file(TOPOLOGIES / "fpf-64.yml")  # 112 FRR nodes


@pytest.fixture
def sysfs(tmp_path: Path) -> Path:
    """KSM's directory as a host that has never used it shows it."""
    (tmp_path / "ksm").mkdir()
    (tmp_path / "ksm" / "run").write_text("0\n")
    (tmp_path / "ksm" / "pages_to_scan").write_text("100\n")
    return tmp_path / "ksm"


def available(monkeypatch: pytest.MonkeyPatch, gib: float) -> None:
    monkeypatch.setattr(ksm, "mem_available_mib", lambda: gib * 1024)
    monkeypatch.setattr(ksm, "unsupported", lambda: None)


def test_auto_shares_only_when_the_frr_nodes_would_take_over_a_quarter_of_the_memory(
        fpf_64: LabPlan, monkeypatch: pytest.MonkeyPatch) -> None:
    need_gib = 112 * ksm.MIB_PER_FRR_NODE / 1024
    available(monkeypatch, 4 * need_gib + 0.1)
    assert ksm.decide(fpf_64, "auto", None) == (False, None)
    available(monkeypatch, 4 * need_gib - 0.1)
    shared, note = ksm.decide(fpf_64, "auto", None)
    assert shared and note is not None
    assert "112 FRR nodes" in note and "without address-space randomisation" in note
    assert "--share-memory off" in note


def test_auto_leaves_a_small_lab_such_as_the_default_one_alone(
        fpf_mini: LabPlan, monkeypatch: pytest.MonkeyPatch) -> None:
    """`make lab` must change nothing of the host unasked: below AUTO_MIN_FRR_NODES, auto
    never shares, however short the memory (a lab that does not fit is refused instead)."""
    available(monkeypatch, 0.1)
    assert ksm.decide(fpf_mini, "auto", None) == (False, None)
    assert ksm.decide(fpf_mini, "on", None)[0] is True


def test_on_and_off_are_kept_whatever_the_memory(fpf_mini: LabPlan,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    available(monkeypatch, 1000)
    assert ksm.decide(fpf_mini, "on", None)[0] is True
    available(monkeypatch, 0.5)
    assert ksm.decide(fpf_mini, "off", None) == (False, None)


def test_a_runtime_that_cannot_refuses_on_and_says_so_for_auto(
        fpf_mini: LabPlan, fpf_64: LabPlan, monkeypatch: pytest.MonkeyPatch) -> None:
    available(monkeypatch, 0.5)
    with pytest.raises(LabError, match="cannot share fpf-mini's memory: docker says no; "
                                       "deploy with --share-memory off"):
        ksm.decide(fpf_mini, "on", "docker says no")
    shared, note = ksm.decide(fpf_64, "auto", "docker says no")
    assert not shared and note is not None and note.startswith("memory not shared")
    assert note.endswith("docker says no")


def test_an_unknown_choice_names_the_choices(fpf_mini: LabPlan) -> None:
    with pytest.raises(LabError, match="--share-memory 'yes': one of auto, on, off"):
        ksm.decide(fpf_mini, "yes", None)


def test_the_host_settings_come_back_once_the_last_sharing_lab_is_gone(
        sysfs: Path, tmp_path: Path) -> None:
    fake, run = FakeKsmd(), tmp_path / "run"
    first, second = tmp_path / "labs" / "a", tmp_path / "labs" / "b"
    first.mkdir(parents=True)
    second.mkdir()
    ksm.start_merging(str(first), sysfs, run, fake.ksmd)
    assert (sysfs / "run").read_text() == "1"
    assert (sysfs / "pages_to_scan").read_text() == str(ksm.DEPLOY_PAGES_TO_SCAN)
    assert fake.policy[KSMD_PID] == (os.SCHED_FIFO, ksm.KSMD_PRIORITY)
    ksm.merge_slowly(sysfs, run)
    assert (sysfs / "pages_to_scan").read_text() == str(ksm.IDLE_PAGES_TO_SCAN)
    ksm.start_merging(str(second), sysfs, run, fake.ksmd)  # the host's values stay the saved ones
    assert not ksm.stop_merging(str(first), sysfs, run, fake.ksmd)
    assert (sysfs / "run").read_text() == "1"
    assert ksm.stop_merging(str(second), sysfs, run, fake.ksmd)
    assert (sysfs / "run").read_text() == "0"
    assert (sysfs / "pages_to_scan").read_text() == "100"
    assert fake.policy[KSMD_PID] == (0, 0)  # SCHED_OTHER again
    assert list(run.glob("*.json")) == []


def test_labs_of_two_roots_share_one_owner_whichever_goes_first(
        sysfs: Path, tmp_path: Path) -> None:
    """The issue's case: two FABRIC_LAB_ROOTs; with a copy of the host's values per root,
    destroying the first root's lab first left ksmd at run 1, pages_to_scan 1000."""
    for order in ((0, 1), (1, 0)):
        fake, run = FakeKsmd(), tmp_path / f"run{order}"
        labs = [str(tmp_path / f"root{i}-{order}" / "lab") for i in range(2)]
        for lab in labs:
            Path(lab).mkdir(parents=True)
            ksm.start_merging(lab, sysfs, run, fake.ksmd)
        for i in order:
            ksm.stop_merging(labs[i], sysfs, run, fake.ksmd)
        assert (sysfs / "run").read_text() == "0", order
        assert (sysfs / "pages_to_scan").read_text() == "100", order
        assert fake.policy[KSMD_PID] == (0, 0), order


def test_a_sweep_puts_the_settings_back_once_every_holder_is_gone(
        sysfs: Path, tmp_path: Path) -> None:
    """`destroy --all` with no lab left: a lab lost in a crash held KSM; its directory is
    gone, so nothing holds it any more."""
    fake, run, lab = FakeKsmd(), tmp_path / "run", tmp_path / "labs" / "lost"
    lab.mkdir(parents=True)
    ksm.start_merging(str(lab), sysfs, run, fake.ksmd)
    assert not ksm.stop_merging(None, sysfs, run, fake.ksmd)  # still there: kept
    lab.rmdir()
    assert ksm.stop_merging(None, sysfs, run, fake.ksmd)
    assert (sysfs / "run").read_text() == "0" and fake.policy[KSMD_PID] == (0, 0)


def test_a_host_that_ran_ksm_already_keeps_it_running(sysfs: Path, tmp_path: Path) -> None:
    (sysfs / "run").write_text("1\n")
    (sysfs / "pages_to_scan").write_text("250\n")
    fake = FakeKsmd()
    ksm.start_merging("lab", sysfs, tmp_path, fake.ksmd)
    ksm.stop_merging("lab", sysfs, tmp_path, fake.ksmd)
    assert (sysfs / "run").read_text() == "1"
    assert (sysfs / "pages_to_scan").read_text() == "250"


def test_with_nothing_saved_neither_rate_nor_stop_touches_anything(
        sysfs: Path, tmp_path: Path) -> None:
    (sysfs / "run").write_text("1\n")  # someone else's KSM
    fake = FakeKsmd()
    ksm.merge_slowly(sysfs, tmp_path)
    assert not ksm.stop_merging(None, sysfs, tmp_path, fake.ksmd)
    assert (sysfs / "run").read_text() == "1\n"
    assert (sysfs / "pages_to_scan").read_text() == "100\n"
    assert fake.policy[KSMD_PID] == (0, 0)
