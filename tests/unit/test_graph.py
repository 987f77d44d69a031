from __future__ import annotations

from harness.graph import layout, to_dot, to_html, to_mermaid
from harness.topology.augment import augment
from harness.topology.loader import load_file, load_text
from tests.conftest import TOPOLOGIES


def test_every_node_and_link_is_drawn() -> None:
    plan = augment(load_file(TOPOLOGIES / "clos.yml"))
    dot, mermaid, html = to_dot(plan), to_mermaid(plan), to_html(plan)
    for node in plan.nodes:
        assert f'"{node.name}"' in dot and f"{node.name}[" in mermaid and node.name in html
    assert dot.count(" -- ") == len(plan.links)
    assert mermaid.count("---") == len(plan.links)
    assert html.count("<line ") == len(plan.links)


def test_layers_put_hosts_below_spines() -> None:
    plan = augment(load_file(TOPOLOGIES / "clos.yml"))
    pos = layout(plan)
    assert pos["host1"][1] > pos["leaf1"][1] > pos["spine1"][1]


def test_long_links_are_labelled_with_distance_and_delay() -> None:
    plan = augment(load_text("""
name: t
topology:
  nodes: {a: {role: spine}, b: {role: superspine}}
  links: [{endpoints: ["a:eth1", "b:eth1"], distance_km: 1000}]
"""))
    assert "1000 km, 4.897ms" in to_dot(plan)
