"""Helpers for tests that deploy real labs: deploy-once fixtures, a leftovers check, and the
host's own state compared before and after every module (harness/testing/hoststate.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.deploy.lab import Lab
from harness.deploy.lab import deploy as deploy_lab
from harness.testing.hoststate import differences, lab_leftovers, snapshot
from harness.testing.plugin import RUNTIME
from tests.conftest import TOPOLOGIES


@pytest.fixture(scope="module", autouse=True)
def host_untouched() -> Iterator[None]:
    """Set up before, and torn down after, every other fixture of the module (its labs)."""
    before = snapshot()
    yield
    changed = differences(before, snapshot())
    assert not changed, "the module changed the host:\n  " + "\n  ".join(changed[:20])


leftovers = lab_leftovers


def deploy(topology: str, name: str, timeout: float = 150) -> Lab:
    return deploy_lab(TOPOLOGIES / topology, name=name, runtime=RUNTIME, timeout=timeout)


@pytest.fixture(scope="module")
def clos_lab() -> Iterator[Lab]:
    lab = deploy("clos.yml", "e2eclos")
    yield lab
    lab.destroy()
