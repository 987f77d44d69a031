"""Plans for test labs: a topology file under a name of the test's own, so parallel runs and
a developer's `make lab` never share namespaces."""

from __future__ import annotations

from pathlib import Path

from harness.topology.pipeline import plan_from_file
from harness.topology.plan import LabPlan


def plan_from(source: str | Path | LabPlan, name: str | None = None) -> LabPlan:
    if isinstance(source, LabPlan):
        return source.model_copy(update={"name": name}) if name else source
    return plan_from_file(source, name)
