"""The nightly report's pieces without a browser: JUnit files merged with their totals, plots
that say when they have nothing to draw, and marks placed inside the frame."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from harness.testing.html import fault_kind, render
from harness.testing.junit import Case, merge, suite, write_suite
from harness.testing.svgplot import HEIGHT, WIDTH, bar_chart, line_chart


def test_suites_merge_with_their_totals(tmp_path: Path) -> None:
    write_suite(tmp_path / "labs.xml", "labs", [Case("clos", "deploy", 1.0),
                                               Case("fpf-64", "deploy", 0.0, skipped="tables")])
    pytest_file = tmp_path / "e2e.xml"  # pytest writes <testsuites><testsuite ...>
    pytest_file.write_text('<testsuites><testsuite name="pytest" tests="2" failures="1" '
                           'errors="0" skipped="0"><testcase name="a"/><testcase name="b">'
                           '<failure message="x"/></testcase></testsuite></testsuites>')
    own = suite("steps", [Case("nightly", "labs", 3.0, failure="exit 1", detail="tail")])
    totals = merge(tmp_path / "junit.xml", own, [tmp_path / "labs.xml", pytest_file])
    assert totals == {"tests": 5, "failures": 2, "errors": 0, "skipped": 1}
    root = ET.parse(tmp_path / "junit.xml").getroot()
    assert [s.get("name") for s in root] == ["steps", "labs", "pytest"]
    assert root.find(".//testcase[@name='labs']/failure").text == "tail"


def test_an_empty_plot_says_so_and_draws_no_mark() -> None:
    svg = line_chart("x", "nothing", {"a": []}, x_label="", y_label="", empty="none given")
    assert "none given" in svg and 'class="mark"' not in svg
    assert "no data" in bar_chart("y", "nothing", {}, y_label="")


def test_marks_stay_inside_the_frame() -> None:
    svg = line_chart("cdf", "cdf", {"a": [(30.0, 0.5), (3000.0, 1.0)], "b": [(45.0, 1.0)]},
                     x_label="us", y_label="share", x_log=True, step=True)
    points = [tuple(map(float, p.split(","))) for m in re.findall(r'points="([^"]+)"', svg)
              for p in m.split()]
    assert len(re.findall('class="mark"', svg)) == 2
    assert all(0 <= x <= WIDTH and 0 <= y <= HEIGHT for x, y in points), points
    bars = bar_chart("b", "bars", {"link_down": {"clos": 125.0, "fpf": 17.0}}, y_label="ms")
    heights = [float(h) for h in re.findall(r'class="mark"[^>]*height="([\d.]+)"', bars)]
    assert len(heights) == 2 and heights[0] > heights[1] * 7


def test_fault_kinds_and_a_page_without_labs() -> None:
    assert fault_kind({"fault": "plane_down(3)"}) == "plane_down"
    assert fault_kind({"fault": "x", "kind": "link_down"}) == "link_down"
    page = render({"stamp": "t", "steps": [], "labs": [], "faults": []})
    assert page.count('<svg class="plot"') == 6 and "no earlier reports given" in page
