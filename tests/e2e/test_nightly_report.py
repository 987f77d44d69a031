"""The nightly report as a reader gets it: two runs of the nightly's labs step on the Clos lab
(real deploys, validation and faults), the second given the first as history; its JUnit XML
holds every suite, and headless Chromium draws every plot with marks in it and every table
with rows, in a page that needs nothing but itself."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.testing.browser import dump_dom, screenshot
from tests.conftest import REPO

pytestmark = pytest.mark.e2e

PLOTS = ("latency-cdf", "busbw-clos", "outage-per-fault", "convergence", "history-convergence",
         "history-latency")


def nightly(*args: str) -> None:
    out = subprocess.run([sys.executable, "bench/nightly.py", "--only", "labs", "--labs",
                          "clos", *args], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    first, second = (tmp_path_factory.mktemp("nightly") / n for n in ("first", "second"))
    nightly("--report-dir", str(first))
    nightly("--report-dir", str(second), "--history", str(first))
    return second


def test_the_junit_xml_holds_the_steps_and_the_lab_stages(report: Path) -> None:
    root = ET.parse(report / "junit.xml").getroot()
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert set(suites) == {"nightly.steps", "nightly.labs"}
    cases = {(c.get("classname"), c.get("name")) for c in suites["nightly.labs"]}
    assert cases == {("clos", "deploy"), ("clos", "validate"), ("clos", "faults")}
    assert root.get("tests") == "4" and root.get("failures") == "0"


def test_the_json_keeps_what_the_plots_are_drawn_from(report: Path) -> None:
    data = json.loads((report / "report.json").read_text())
    [clos] = data["labs"]
    assert clos["converge_s"] <= clos["deploy_s"]
    assert all(len(p["rtts_us"]) == 200 for p in clos["validation"]["pairs"])
    kinds = {r["kind"] for r in data["faults"]}
    assert kinds == {"link_down", "node_crash", "bgp_reset"}
    assert all(r["sent"] == 3000 for r in data["faults"])


def test_chromium_draws_every_plot_and_table(report: Path, tmp_path: Path) -> None:
    page = report / "report.html"
    assert not re.search(r'(src|href)="(https?:)?//', page.read_text()), "self-contained"
    dom = dump_dom(page)
    drawn = {m["id"]: int(m["n"]) for m in re.finditer(
        r'<svg[^>]*\bid="(?P<id>[^"]+)"[^>]*\bdata-drawn="(?P<n>\d+)"', dom)}
    assert set(PLOTS) <= set(drawn), drawn
    assert all(drawn[p] > 0 for p in PLOTS), drawn
    assert drawn["outage-per-fault"] == 3 and drawn["convergence"] == 2, drawn
    for table in ("steps", "labs", "faults"):
        body = re.search(rf'<table id="{table}">.*?<tbody>(.*?)</tbody>', dom, re.S)
        assert body and "<tr>" in body[1], table
    assert screenshot(page, tmp_path / "report.png", height=2400).stat().st_size > 30_000
