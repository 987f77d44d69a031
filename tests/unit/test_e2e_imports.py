"""Importing the e2e modules (as pytest does to collect them) creates nothing: no namespace,
no probe. `make test` runs this as `nobody` too, where any attempt would fail outright."""

from __future__ import annotations

import importlib
from pathlib import Path

from harness.linux.nsenter import list_netns

E2E = sorted((Path(__file__).parent.parent / "e2e").glob("test_*.py"))


def test_importing_every_e2e_module_creates_no_namespace() -> None:
    before = set(list_netns())
    for path in E2E:
        importlib.import_module(f"tests.e2e.{path.stem}")
    assert len(E2E) >= 8 and set(list_netns()) - before == set()
