"""Topology files are YAML 1.2: the words and numbers YAML 1.1 turns into booleans, sexagesimal
or octal numbers stay what the user wrote (tests/corpus/yaml12)."""

from __future__ import annotations

from pathlib import Path

from harness.topology.augment import augment
from harness.topology.loader import dump_yaml, load_file, load_text

CORPUS = Path(__file__).parent.parent / "corpus" / "yaml12"


def test_names_and_values_keep_their_yaml_1_2_meaning() -> None:
    loaded = load_file(CORPUS / "names-and-values.yml")
    plan = augment(loaded)
    assert [n.name for n in plan.nodes] == ["no", "on", "010", "off"]
    on = plan.node("on")
    assert on.labels == {"window": "1:30", "rack": "42", "enabled": "yes", "spare": "true"}
    assert plan.node("no").plane == 10  # YAML 1.2 has no octal without 0o
    assert plan.node("off").exec == ["on"]
    assert {(link.a.node, link.b.node) for link in plan.links} == {
        ("on", "no"), ("010", "on"), ("off", "on")}


def test_every_key_keeps_its_line() -> None:
    lines = load_file(CORPUS / "names-and-values.yml").source.lines
    assert lines["topology", "nodes", "no"] == 6
    assert lines["topology", "nodes", "010"] == 8
    assert lines["topology", "nodes", "on", "labels", "window"] == 7
    assert lines["topology", "links", 1, "endpoints", 0] == 12


def test_dump_reads_back_as_written() -> None:
    data = {"name": "no", "topology": {"nodes": {"on": {"role": "leaf", "labels": {
        "t": "1:30", "n": "010", "y": "yes"}}}}}
    assert load_text(dump_yaml(data)).spec.model_dump()["topology"]["nodes"]["on"][
        "labels"] == {"t": "1:30", "n": "010", "y": "yes"}
