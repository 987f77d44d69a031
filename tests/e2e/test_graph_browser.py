"""`labctl graph --format html` as Chromium lays it out: every node's name fits inside its
box and no two boxes of a row overlap, measured with the browser's own text metrics on the
shipped FPF labs (fpf-mini's leaves used to overlap and lose the ends of their names)."""

from __future__ import annotations

import json
import re
from itertools import pairwise
from pathlib import Path

import pytest

from harness.testing.browser import dump_dom, screenshot
from harness.topology.drawing import to_html
from harness.topology.pipeline import plan_from_file
from tests.conftest import TOPOLOGIES

pytestmark = pytest.mark.e2e

# Runs in the page: each node's box and its name's extent in the SVG's own units.
MEASURE = """<pre id="measured"></pre><script>
const boxes = [...document.querySelectorAll("g.node")].map(g => {
  const r = g.querySelector("rect").getBBox(), t = g.querySelector("text").getBBox();
  return {name: g.querySelector("text").textContent, x: r.x, y: r.y, w: r.width,
          h: r.height, tx: t.x, tw: t.width};
});
const view = document.querySelector("svg").viewBox.baseVal;
document.getElementById("measured").textContent =
  JSON.stringify({boxes, view: [view.width, view.height]});
</script>"""


@pytest.mark.parametrize("topology", ["fpf-mini.yml", "fpf-64.yml"])
def test_every_name_fits_its_box_and_no_boxes_overlap(topology: str, tmp_path: Path) -> None:
    plan = plan_from_file(TOPOLOGIES / topology)
    page = tmp_path / "graph.html"
    page.write_text(to_html(plan).replace("</body>", MEASURE + "</body>"))
    found = re.search(r'<pre id="measured">(.*?)</pre>', dump_dom(page), re.S)
    assert found, "the page's measurement did not run"
    measured = json.loads(found[1].replace("&quot;", '"'))
    boxes, (width, height) = measured["boxes"], measured["view"]
    assert len(boxes) == len(plan.nodes)
    for b in boxes:
        assert b["x"] <= b["tx"] and b["tx"] + b["tw"] <= b["x"] + b["w"], b  # name inside
        assert b["x"] >= 0 and b["x"] + b["w"] <= width and b["y"] + b["h"] <= height, b
    rows: dict[float, list[dict]] = {}
    for b in boxes:
        rows.setdefault(b["y"], []).append(b)
    for row in rows.values():
        row.sort(key=lambda b: b["x"])
        for left, right in pairwise(row):
            assert left["x"] + left["w"] <= right["x"], (left["name"], right["name"])
    assert screenshot(page, tmp_path / "graph.png").stat().st_size > 10_000
