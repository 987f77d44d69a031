"""A failed test's lab keeps its evidence: archived by the plugin while the failure is still
in it, before its fixture destroys it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import TOPOLOGIES
from tests.e2e.conftest import leftovers

pytestmark = pytest.mark.e2e

FAILING = f"""
import pytest
from harness.testing import plan_from

@pytest.fixture(scope="module")
def topology():
    return plan_from({str(TOPOLOGIES / "pair.yml")!r}, name="e2eevidence")

def test_passes(lab):
    pass

def test_fails_with_a_link_down(lab, faults):
    faults.link_down("r1--r2")
    assert False, "on purpose"
"""


def test_a_failed_test_archives_its_lab_before_it_is_destroyed(tmp_path: Path) -> None:
    (tmp_path / "test_failing.py").write_text(FAILING)
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                          "--evidence-dir", "ev", "--fault-report", "faults.json",
                          "test_failing.py"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 1 and "1 failed, 1 passed" in out.stdout, out.stdout + out.stderr
    archived = tmp_path / "ev" / "test_failing.py_test_fails_with_a_link_down" / "e2eevidence"
    assert "fabric-lab evidence" in out.stdout and str(archived) in out.stdout
    assert not (tmp_path / "ev" / "test_failing.py_test_passes").exists()
    r1 = json.loads((archived / "nodes" / "r1.json").read_text())
    eth1 = next(link for link in r1["kernel"]["links"] if link["ifname"] == "eth1")
    assert "UP" not in eth1["flags"], "the state at the failure, link down, not after undo"
    assert r1["frr"]["bgp_summary"]["ipv4Unicast"]["peerCount"] == 1
    assert [f["kind"] for f in json.loads((archived / "faults.json").read_text())] == \
        ["link_down"]
    assert (archived / "files" / "plan.json").is_file()
    assert any((archived / "files" / "nodes" / "r1").rglob("*.log")), "the node's logs"
    assert leftovers("e2eevidence") == []


BENCH = f"""
from harness.deploy.lab import deploy

for name, fails in (("e2eclean", False), ("e2ebench", True)):
    lab = deploy({str(TOPOLOGIES / "pair.yml")!r}, name=name)
    try:
        if fails:
            raise RuntimeError("a bench step failing")
    finally:
        lab.destroy()
"""


def test_a_failing_nightly_step_keeps_its_labs_evidence(tmp_path: Path) -> None:
    """As the nightly runs a bench: $FABRIC_LAB_EVIDENCE_DIR set, a lab destroyed in the
    `finally` of a failure is archived first; one destroyed after success is not."""
    out = subprocess.run([sys.executable, "-c", BENCH], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300,
                         env={**os.environ, "FABRIC_LAB_EVIDENCE_DIR": str(tmp_path / "ev")})
    assert out.returncode == 1 and "a bench step failing" in out.stderr, out.stderr
    assert sorted(p.name for p in (tmp_path / "ev").iterdir()) == ["e2ebench"]
    r1 = json.loads((tmp_path / "ev" / "e2ebench" / "nodes" / "r1.json").read_text())
    assert r1["frr"]["bgp_summary"]["ipv4Unicast"]["peerCount"] == 1
    assert leftovers("e2ebench") == [] and leftovers("e2eclean") == []
