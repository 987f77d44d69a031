"""Where bfdd and its BFD offload meet: bfdd (FRR 8.4) keeps 63 characters of its
--dplaneaddr path and says nothing when it cuts one, which left every switch of a lab with a
longer name without BFD. The place is short whatever the lab and node are called."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.errors import LabError
from harness.core.paths import LAB_NAME_MAX, bfd_socket_dir
from harness.nodes.bfd.offload import DPLANE_PATH_MAX, bfdd_args


def test_the_longest_lab_and_node_names_fit() -> None:
    bfd_dir = bfd_socket_dir("l" * LAB_NAME_MAX, "a-very-long-node-name-from-a-containerlab-file")
    flag, address = bfdd_args(bfd_dir)
    assert flag == "--dplaneaddr" and len(address.removeprefix("unix:")) <= DPLANE_PATH_MAX


def test_each_lab_and_node_gets_its_own_place() -> None:
    places = {bfd_socket_dir(lab, node) for lab in ("fpf-mini", "fpf-bench-bfd")
              for node in ("p0-leaf1", "host1")}
    assert len(places) == 4
    assert bfd_socket_dir("fpf-mini", "host1").name.split("-")[0] == \
        bfd_socket_dir("fpf-mini", "p0-leaf1").name.split("-")[0]  # found by lab


def test_a_path_bfdd_would_cut_is_refused() -> None:
    with pytest.raises(LabError, match="63 characters"):
        bfdd_args(Path("/run/fabric-lab/fpf-bench-bfd/nodes/p0-leaf1/run"))
