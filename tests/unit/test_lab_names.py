"""The one lab-name rule: a name is never a path, and a topology file stands for the lab it
names (as containerlab's -t FILE)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli.labref import lab_name
from harness.core.errors import LabError
from harness.core.paths import check_lab_name, is_lab_name, lab_dir, labs_root

TOPOLOGIES = Path(__file__).parent.parent.parent / "topologies"


@pytest.mark.parametrize("bad", ["/some/dir", ".", "..", "../x", "a/b", "a.b", "", "-x",
                                 "x" * 25, "lab name"])
def test_paths_and_bad_names_are_not_lab_names(bad: str) -> None:
    assert not is_lab_name(bad)
    with pytest.raises(LabError, match="not a lab name"):
        lab_dir(bad)


def test_a_good_name_stays_under_the_labs_root() -> None:
    assert lab_dir("clos-2_b") == labs_root() / "clos-2_b"
    assert check_lab_name("x" * 24) == "x" * 24


def test_a_topology_file_names_its_lab() -> None:
    assert lab_name(str(TOPOLOGIES / "clos.yml")) == "clos"
    assert lab_name(None, str(TOPOLOGIES / "fpf-mini.yml")) == "fpf-mini"
    assert lab_name("clos") == "clos" and lab_name(None) is None


def test_a_path_that_is_no_topology_file_is_an_error() -> None:
    with pytest.raises(LabError, match="neither a lab name"):
        lab_name("/some/dir")
    with pytest.raises(LabError, match="not both"):
        lab_name("clos", str(TOPOLOGIES / "clos.yml"))
