from __future__ import annotations

import re
from itertools import pairwise

from harness.topology.augment import augment
from harness.topology.drawing import CHAR_W, layout, to_dot, to_html, to_mermaid
from harness.topology.loader import load_text
from harness.topology.pipeline import plan_from_file
from tests.conftest import TOPOLOGIES


def test_every_node_and_link_is_drawn() -> None:
    plan = plan_from_file(TOPOLOGIES / "clos.yml")
    dot, mermaid, html = to_dot(plan), to_mermaid(plan), to_html(plan)
    for node in plan.nodes:
        assert f'"{node.name}"' in dot and f"{node.name}[" in mermaid and node.name in html
    assert dot.count(" -- ") == len(plan.links)
    assert mermaid.count("---") == len(plan.links)
    assert html.count('class="link"') == len(plan.links)


def test_layers_put_hosts_below_spines() -> None:
    plan = plan_from_file(TOPOLOGIES / "clos.yml")
    boxes = layout(plan).boxes
    assert boxes["host1"].y > boxes["leaf1"].y > boxes["spine1"].y


def test_long_links_are_labelled_with_distance_and_delay() -> None:
    plan = augment(load_text("""
name: t
topology:
  nodes: {a: {role: spine}, b: {role: superspine}}
  links: [{endpoints: ["a:eth1", "b:eth1"], distance_km: 1000}]
"""))
    assert "1000 km, 4.897ms" in to_dot(plan)


def test_fpf_is_drawn_by_plane_with_no_box_overlapping_another() -> None:
    """fpf-mini's 16 leaves used to share one row 1200 wide: boxes overlapped, names were cut."""
    plan = plan_from_file(TOPOLOGIES / "fpf-mini.yml")
    drawn = layout(plan)
    assert [g.label for g in drawn.groups] == [f"plane {p}" for p in range(8)]
    for group in drawn.groups:  # a plane's nodes inside its group
        for n in (n for n in plan.nodes if f"plane {n.plane}" == group.label):
            box = drawn.boxes[n.name]
            assert group.left <= box.x - box.width / 2 and \
                box.x + box.width / 2 <= group.left + group.width
    rows: dict[float, list] = {}
    for name, box in drawn.boxes.items():
        assert box.width >= len(name) * CHAR_W + 8, name  # the name fits
        rows.setdefault(box.y, []).append((box.x - box.width / 2, box.x + box.width / 2))
    for spans in rows.values():
        spans.sort()
        assert all(left_end <= right_start for (_, left_end), (right_start, _)
                   in pairwise(spans)), spans
    html = to_html(plan)
    assert len({c for c in re.findall(r"hsl\((\d+) 65% 40%\)", html)}) == 8
