"""A fault is one module of harness/faults/catalog/ (its shape: harness/faults/injector.py):
a new one, written as one file in a package of its own here, is injected, listed, undone by
name and offered by `labctl fault` with no other edit; and nothing outside the catalog asks
which fault it is holding."""

from __future__ import annotations

import argparse
import ast
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.cli import fault as fault_cli
from harness.faults import Faults, records
from harness.faults.injector import catalog, load

REPO = Path(__file__).resolve().parents[2]
CATALOG = REPO / "harness" / "faults" / "catalog"

BLINK = '''
"""A blink: a node's lights go out (a fault of the test's own)."""
from harness.faults.injector import FaultKind, Verb

SEEN = []


def inject(lab, fault_id, undo, node, *, seconds=1.0):
    undo.own["dark"] = node
    SEEN.append(("dark", node, seconds))


def restore(lab, fault_id, own):
    SEEN.append(("lit", own["dark"]))


FAULTS = (FaultKind("blink", inject, lambda lab, node, seconds=1.0: node,
                    undone_by="unblink", restore=restore),)
VERBS = (
    Verb("blink", "put a node's lights out",
         lambda parser: parser.add_argument("node"),
         lambda faults, args: faults.blink(args.node), again=lambda a: f"unblink {a.node}"),
    Verb("unblink", "light it again", lambda parser: parser.add_argument("node"),
         lambda faults, args: faults.unblink(args.node), undoes=True),
)
'''


@pytest.fixture
def extra(tmp_path: Path) -> Iterator[SimpleNamespace]:
    """A catalog of one new fault, in a package of the test's own."""
    package = tmp_path / "extra_faults"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "blink.py").write_text(BLINK)
    sys.path.insert(0, str(tmp_path))
    try:
        module = importlib.import_module("extra_faults")
        yield SimpleNamespace(catalog=load(module),
                              seen=importlib.import_module("extra_faults.blink").SEEN)
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.startswith("extra_faults")]:
            del sys.modules[name]


def test_a_new_fault_is_one_file(extra: SimpleNamespace, tmp_path: Path) -> None:
    lab = SimpleNamespace(dir=tmp_path / "lab", plan=None)
    faults = Faults(lab, extra.catalog)
    fault = faults.blink("leaf1", seconds=2.0)
    assert extra.seen == [("dark", "leaf1", 2.0)]
    [record] = records.load_all(lab.dir)
    assert (str(record), record.undo.own) == ("blink(leaf1)", {"dark": "leaf1"})
    again = Faults.in_place(lab, extra.catalog)  # another shell
    again.unblink("leaf1")
    assert extra.seen[-1] == ("lit", "leaf1") and records.load_all(lab.dir) == []
    assert fault.id == record.id


def test_a_new_faults_verbs_reach_labctl(extra: SimpleNamespace) -> None:
    parser = argparse.ArgumentParser(prog="labctl")
    fault_cli.register(parser.add_subparsers(dest="command"), extra.catalog)
    args = parser.parse_args(["fault", "lab1", "blink", "spine1"])
    assert args.run is fault_cli.inject and args.faults.verbs[args.verb].name == "blink"
    undoing = parser.parse_args(["fault", "lab1", "unblink", "spine1", "--no-wait"])
    assert undoing.no_wait, "a verb that undoes waits for convergence unless told not to"


def test_every_shipped_module_brings_a_fault_or_a_verb() -> None:
    shipped = catalog()
    for path in CATALOG.glob("*.py"):
        if path.name == "__init__.py":
            continue
        module = importlib.import_module(f"harness.faults.catalog.{path.stem}")
        assert getattr(module, "FAULTS", ()) or getattr(module, "VERBS", ()), path.name
    assert {"link_down", "node_crash", "plane_down", "plane_loss", "link_loss", "bgp_reset",
            "impair", "partition"} <= set(shipped.kinds)
    undone = {k.undone_by for k in shipped.kinds.values() if k.undone_by}
    assert undone == {"link_up", "node_restart", "plane_up"}


def names_compared(source: str, names: set[str]) -> list[int]:
    """Lines that compare something with a fault's name: code asking which fault it holds."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            constants = [c for c in ast.walk(node) if isinstance(c, ast.Constant)]
            if any(c.value in names for c in constants if isinstance(c.value, str)):
                found.append(node.lineno)
    return found


def test_nothing_outside_the_catalog_asks_which_fault_it_holds() -> None:
    shipped = catalog()
    names = set(shipped.kinds) | set(shipped.verbs)
    asking = [f"{p.relative_to(REPO)}:{line}" for p in sorted((REPO / "harness").rglob("*.py"))
              if CATALOG not in p.parents for line in names_compared(p.read_text(), names)]
    assert not asking, f"code outside the catalog branches on a fault's name: {asking}"
    assert names_compared('if args.verb == "bgp-reset":\n    pass\n', names) == [1], \
        "the check sees the shape the CLI had"
