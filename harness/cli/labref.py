"""Which lab a command means: a lab name, a topology file (`-t FILE`, or a .yml path where a
name is expected, as containerlab users type it; a folder holding one), or the only lab there
is.

A name is checked against the one lab-name rule before anything is looked up, so a path such
as `/some/dir`, `.` or `..` is an error here and never reaches code that removes things.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.core.errors import LabError
from harness.core.paths import LAB_NAME_RULE, is_lab_name
from harness.deploy.lab import Lab, lab_names
from harness.topology.loader import load_file, topology_in

TOPOLOGY_SUFFIXES = (".yml", ".yaml")


def add_lab_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("name", nargs="?", metavar="NAME|FILE",
                        help=f"{what}: a lab name, or the topology file that names it")
    parser.add_argument("-t", "--topo", dest="topology", metavar="FILE",
                        help="the lab this topology file names (as containerlab's -t)")


def is_topology(path: Path) -> bool:
    """A file, or a folder holding a topology file (containerlab's `-t folder/`)."""
    return path.is_file() or (path.is_dir() and topology_in(path) is not None)


def lab_name(name: str | None, topology: str | None = None) -> str | None:
    """The lab meant by a NAME|FILE argument and `-t FILE`; None when neither is given."""
    if name is not None and topology is not None:
        raise LabError(f"give a lab name or -t FILE, not both ({name!r} and -t {topology!r})")
    if name is not None and not is_lab_name(name):
        if not (name.endswith(TOPOLOGY_SUFFIXES) or is_topology(Path(name))):
            raise LabError(f"{name!r} is neither a lab name ({LAB_NAME_RULE}) nor a topology "
                           "file; `labctl list` shows the labs")
        topology = name
    if topology is not None:
        return load_file(topology).spec.name
    return name


def open_lab(name: str | None, topology: str | None = None) -> Lab:
    """A lab by name or file, or the only one that exists."""
    resolved = lab_name(name, topology)
    if resolved is None:
        names = lab_names()
        if len(names) != 1:
            raise LabError(f"name a lab: {', '.join(names) or 'none exist'}")
        resolved = names[0]
    return Lab.open(resolved)
