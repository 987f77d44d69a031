"""Every bench script imports: a benchmark that only runs nightly must not learn of a moved
name from the nightly report. Importing runs nothing (each script acts under `__main__`)."""

from __future__ import annotations

import importlib
from pathlib import Path

BENCHES = sorted((Path(__file__).parent.parent.parent / "bench").glob("*.py"))


def test_every_bench_script_imports() -> None:
    for path in BENCHES:
        importlib.import_module(f"bench.{path.stem}")
    assert len(BENCHES) >= 9
