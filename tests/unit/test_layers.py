"""The harness's packages import one another one way only, so each layer (topology, runtime,
node kinds, links, faults, cli) can be read, tested and replaced without the ones above it,
and the import cycles issue 9 took out (Lab <-> converge/impair/spray, the SAI backend reading
the switch) cannot come back in another shape. Every import counts: one inside a function, and
one under `if TYPE_CHECKING:` too (a type names what a module depends on, and a circle of
type imports is a circle of knowledge, as LabContext in deploy/ used by nodes/ was)."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parents[2] / "harness"


def layer(module: str) -> str:
    """harness.nodes.frr -> harness.nodes; a top-level module is a layer of its own."""
    return ".".join(module.split(".")[:2])


def imported(tree: ast.AST) -> set[str]:
    """Every harness module `tree` imports, at run time or for types."""
    found: set[str] = set()
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        found |= imported(node)
    return {m for m in found if m.startswith("harness.")}


def layer_graph() -> dict[str, set[str]]:
    """Layer -> the other layers it imports."""
    graph: dict[str, set[str]] = {}
    for path in HARNESS.rglob("*.py"):
        module = ".".join(path.relative_to(HARNESS.parent).with_suffix("").parts)
        mine = layer(module.removesuffix(".__init__"))
        uses = {layer(m) for m in imported(ast.parse(path.read_text()))}
        graph.setdefault(mine, set()).update(uses - {mine, "harness"})
    return graph


def test_the_layers_import_one_another_one_way() -> None:
    try:
        order = list(TopologicalSorter(layer_graph()).static_order())
    except CycleError as exc:
        circle = " -> ".join(reversed(exc.args[1]))  # graphlib lists it importer last
        pytest.fail(f"these layers import each other in a circle: {circle}")
    assert order.index("harness.topology") < order.index("harness.linux") \
        < order.index("harness.runtime") \
        < order.index("harness.nodes") < order.index("harness.deploy") \
        < order.index("harness.cli")


def test_the_check_sees_a_cycle(tmp_path: Path) -> None:
    """Guard against a check that cannot fail: a back edge is a cycle."""
    graph = layer_graph()
    graph["harness.topology"].add("harness.cli")
    with pytest.raises(CycleError):
        list(TopologicalSorter(graph).static_order())


def test_type_checking_and_function_imports_count() -> None:
    tree = ast.parse("from typing import TYPE_CHECKING\n"
                     "if TYPE_CHECKING:\n    from harness.deploy.stages import Stage\n"
                     "def f():\n    from harness.links.impair import apply\n")
    assert imported(tree) == {"harness.deploy.stages", "harness.deploy.stages.Stage",
                              "harness.links.impair", "harness.links.impair.apply"}


def test_a_type_only_upward_import_is_a_cycle() -> None:
    """The shape the old check let through: nodes/ naming a type from deploy/ for its hints."""
    graph = layer_graph()
    upward = imported(ast.parse("from typing import TYPE_CHECKING\n"
                                "if TYPE_CHECKING:\n"
                                "    from harness.deploy.stages import Stage\n"))
    graph["harness.nodes"] |= {layer(m) for m in upward}
    with pytest.raises(CycleError):
        list(TopologicalSorter(graph).static_order())
