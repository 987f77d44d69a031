"""containerlab habits that work here too: a folder for a topology file, a subcommand's own
usage on a bad argument, and `destroy --cleanup` removing only what `save` wrote."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.cli import parse
from harness.cli.labref import lab_name
from harness.cli.lifecycle import remove_saved_configs, saved_configs
from harness.core.errors import LabError, TopologyError
from harness.topology.loader import load_file
from harness.topology.pipeline import plan_from_file
from tests.conftest import REPO, TOPOLOGIES

NUMBERED = REPO / "tests" / "labs" / "numbered-clos"


def test_a_folder_stands_for_its_one_topology_file(tmp_path: Path) -> None:
    assert load_file(NUMBERED).spec.name == load_file(
        NUMBERED / "numbered-clos.clab.yml").spec.name
    assert lab_name(str(NUMBERED)) == "numclos"
    shutil.copy(TOPOLOGIES / "pair.yml", tmp_path / "pair.yml")
    assert load_file(tmp_path).spec.name == "pair", "no *.clab.yml: its one .yml"
    shutil.copy(TOPOLOGIES / "pair.yml", tmp_path / "other.yml")
    with pytest.raises(TopologyError, match=r"2 topology files match \*\.y\*ml: other.yml, "
                                            r"pair.yml\n    fix: name the file itself"):
        load_file(tmp_path)


def test_a_folder_without_a_topology_is_no_lab(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match="a folder with no topology file"):
        load_file(tmp_path)
    with pytest.raises(LabError, match="neither a lab name"):
        lab_name(str(tmp_path))


def test_a_folders_other_yaml_is_not_its_topology(tmp_path: Path) -> None:
    """A project's root holds mkdocs.yml (this repository's does): `labctl destroy .` there
    is a path, not a lab, and a topology beside it is still found."""
    (tmp_path / "mkdocs.yml").write_text("site_name: x\nnav:\n  - Home: index.md\n")
    with pytest.raises(LabError, match="neither a lab name"):
        lab_name(str(tmp_path))
    shutil.copy(TOPOLOGIES / "pair.yml", tmp_path / "pair.yml")
    assert load_file(tmp_path).spec.name == "pair"


@pytest.mark.parametrize(("argv", "usage"), [
    (["destroy", "--bogus", "x"], "usage: labctl destroy"),
    (["fault", "x", "clear", "--bogus"], "usage: labctl fault NAME|FILE clear"),
    (["netem", "show", "--bogus"], "usage: labctl netem show"),
])
def test_a_bad_argument_prints_that_subcommands_usage(argv: list[str], usage: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.startswith(usage), err
    assert "unrecognized arguments: --bogus" in err


def _saved(tmp_path: Path) -> tuple[Path, Path]:
    topology = tmp_path / "pair.yml"
    shutil.copy(TOPOLOGIES / "pair.yml", topology)
    folder = saved_configs(plan_from_file(topology))
    for node in ("r1", "r2"):
        (folder / node).mkdir(parents=True)
        (folder / node / "frr.conf").write_text("hostname x\n")
    return topology, folder


def test_cleanup_removes_what_save_wrote(tmp_path: Path) -> None:
    topology, folder = _saved(tmp_path)
    remove_saved_configs("pair", None, str(topology))
    assert not folder.exists() and topology.exists()


def test_cleanup_leaves_a_folder_holding_anything_else(tmp_path: Path) -> None:
    topology, folder = _saved(tmp_path)
    (folder / "r1" / "notes.txt").write_text("mine")
    with pytest.raises(LabError, match=r"holds more than `save` wrote \(r1/notes.txt\)"):
        remove_saved_configs("pair", None, str(topology))
    assert (folder / "r1" / "notes.txt").exists() and (folder / "r2" / "frr.conf").exists()
