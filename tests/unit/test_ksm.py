"""When a lab shares its memory, and KSM's host switches: saved once by the first lab that
shares, put back only when the last one is gone (harness/linux/ksm.py), on a fake sysfs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import LabError
from harness.linux import ksm
from harness.topology.augment import augment
from harness.topology.loader import load_file
from harness.topology.plan import LabPlan
from tests.conftest import TOPOLOGIES

NO_THREAD = list  # the real ksmd's scheduling is the e2e test's (tests/e2e/test_share_memory.py)


@pytest.fixture
def fpf_mini() -> LabPlan:
    return augment(load_file(TOPOLOGIES / "fpf-mini.yml"))  # 28 FRR nodes: ~1.5 GiB unshared


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
        fpf_mini: LabPlan, monkeypatch: pytest.MonkeyPatch) -> None:
    need_gib = 28 * ksm.MIB_PER_FRR_NODE / 1024
    available(monkeypatch, 4 * need_gib + 0.1)
    assert ksm.decide(fpf_mini, "auto", None) == (False, None)
    available(monkeypatch, 4 * need_gib - 0.1)
    shared, note = ksm.decide(fpf_mini, "auto", None)
    assert shared and note is not None
    assert "28 FRR nodes" in note and "without address-space randomisation" in note
    assert "--share-memory off" in note


def test_on_and_off_are_kept_whatever_the_memory(fpf_mini: LabPlan,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    available(monkeypatch, 1000)
    assert ksm.decide(fpf_mini, "on", None)[0] is True
    available(monkeypatch, 0.5)
    assert ksm.decide(fpf_mini, "off", None) == (False, None)


def test_a_runtime_that_cannot_refuses_on_and_says_so_for_auto(
        fpf_mini: LabPlan, monkeypatch: pytest.MonkeyPatch) -> None:
    available(monkeypatch, 0.5)
    with pytest.raises(LabError, match="cannot share fpf-mini's memory: docker says no; "
                                       "deploy with --share-memory off"):
        ksm.decide(fpf_mini, "on", "docker says no")
    shared, note = ksm.decide(fpf_mini, "auto", "docker says no")
    assert not shared and note is not None and note.startswith("memory not shared")
    assert note.endswith("docker says no")


def test_an_unknown_choice_names_the_choices(fpf_mini: LabPlan) -> None:
    with pytest.raises(LabError, match="--share-memory 'yes': one of auto, on, off"):
        ksm.decide(fpf_mini, "yes", None)


def test_the_host_settings_come_back_once_the_last_sharing_lab_is_gone(
        sysfs: Path, tmp_path: Path) -> None:
    root = tmp_path / "labs"
    ksm.start_merging(sysfs, root, NO_THREAD)
    assert (sysfs / "run").read_text() == "1"
    assert (sysfs / "pages_to_scan").read_text() == str(ksm.DEPLOY_PAGES_TO_SCAN)
    ksm.merge_slowly(sysfs, root)
    assert (sysfs / "pages_to_scan").read_text() == str(ksm.IDLE_PAGES_TO_SCAN)
    ksm.start_merging(sysfs, root, NO_THREAD)  # a second lab: the host's values stay the ones saved
    assert json.loads((root / ksm.SAVED).read_text()) == {"run": "0", "pages_to_scan": "100",
                                                          "ksmd": []}
    ksm.stop_merging(still_sharing=lambda: True, ksm=sysfs, root=root, ksmd=NO_THREAD)
    assert (sysfs / "run").read_text() == "1"
    ksm.stop_merging(still_sharing=lambda: False, ksm=sysfs, root=root, ksmd=NO_THREAD)
    assert (sysfs / "run").read_text() == "0"
    assert (sysfs / "pages_to_scan").read_text() == "100"
    assert not (root / ksm.SAVED).exists()


def test_a_host_that_ran_ksm_already_keeps_it_running(sysfs: Path, tmp_path: Path) -> None:
    (sysfs / "run").write_text("1\n")
    (sysfs / "pages_to_scan").write_text("250\n")
    ksm.start_merging(sysfs, tmp_path, NO_THREAD)
    ksm.stop_merging(still_sharing=lambda: False, ksm=sysfs, root=tmp_path, ksmd=NO_THREAD)
    assert (sysfs / "run").read_text() == "1"
    assert (sysfs / "pages_to_scan").read_text() == "250"


def test_with_nothing_saved_neither_rate_nor_stop_touches_anything(
        sysfs: Path, tmp_path: Path) -> None:
    (sysfs / "run").write_text("1\n")  # someone else's KSM
    root = tmp_path / "labs"
    ksm.merge_slowly(sysfs, root)
    ksm.stop_merging(still_sharing=lambda: False, ksm=sysfs, root=root, ksmd=NO_THREAD)
    assert (sysfs / "run").read_text() == "1\n"
    assert (sysfs / "pages_to_scan").read_text() == "100\n"
    assert not (root / ksm.SAVED).exists()
