"""A topology file becomes a plan in one call: load -> validate -> augment, as netlab's
stages run. Every way in (labctl, the pytest plugin, bench, training, ansible) takes this one,
so a file means the same plan everywhere. Pure: no root, nothing on the host changes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.topology.augment import augment
from harness.topology.loader import load_file
from harness.topology.plan import LabPlan


def plan_from_file(path: str | Path, name: str | None = None,
                   node_filter: Sequence[str] | None = None) -> LabPlan:
    """`name` overrides the file's lab name (two copies side by side); `node_filter` keeps
    only those nodes and the links between them. Validation happens inside augment, so a bad
    file raises a TopologyError naming its file, line and key before anything is made."""
    return augment(load_file(path), name, node_filter)
