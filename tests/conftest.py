"""Shared test helpers: topology paths, and e2e tests that fail loudly without root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TOPOLOGIES = REPO / "topologies"


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("e2e") and os.geteuid() != 0:
        pytest.fail("e2e tests create namespaces and need root: run `sudo make test`")
