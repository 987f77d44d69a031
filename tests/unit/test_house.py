"""The house's promises a newcomer relies on: `ls harness/` shows packages only (the layers,
named in the field's words), and every wait goes through the one helper at the ground floor
(harness/core/wait.py), so no layer hand-writes a deadline loop of its own."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "harness"
WAIT = HARNESS / "core" / "wait.py"


def test_the_harness_holds_packages_only() -> None:
    loose = sorted(p.name for p in HARNESS.iterdir()
                   if p.is_file() and p.suffix == ".py" and p.name != "__init__.py")
    assert not loose, f"modules outside every package: {loose}"


def _is_clock(node: ast.AST) -> bool:
    """`time.monotonic()` (or `_ns`) or a name that holds a deadline."""
    if isinstance(node, ast.Name):
        return "deadline" in node.id
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
        and node.value.id == "time" and node.attr.startswith("monotonic")


def wait_loops(source: str) -> list[int]:
    """Lines of loops that sleep and compare the clock with a deadline: a wait written by
    hand. A loop that sleeps to pace itself (a flap every period, a timer's lateness) compares
    no clock and is not one."""
    found = []
    for loop in ast.walk(ast.parse(source)):
        if not isinstance(loop, ast.While | ast.For):
            continue
        inside = list(ast.walk(loop))
        sleeps = any(isinstance(n, ast.Attribute) and n.attr == "sleep" for n in inside)
        compares = any(isinstance(n, ast.Compare) and any(
            _is_clock(part) for operand in [n.left, *n.comparators] for part in ast.walk(operand))
            for n in inside)
        if sleeps and compares:
            found.append(loop.lineno)
    return found


def test_every_wait_goes_through_the_one_helper() -> None:
    hand_written = [f"{path.relative_to(REPO)}:{line}"
                    for root in ("harness", "bench", "tests")
                    for path in sorted((REPO / root).rglob("*.py")) if path != WAIT
                    for line in wait_loops(path.read_text())]
    assert not hand_written, f"wait loops written by hand (use harness.core.wait): {hand_written}"


def test_the_check_sees_a_hand_written_wait() -> None:
    """Guard against a check that cannot fail: the shapes the old code had are found."""
    assert wait_loops("import time\ndeadline = time.monotonic() + 5\n"
                      "while not ready():\n    if time.monotonic() > deadline:\n"
                      "        raise TimeoutError\n    time.sleep(0.1)\n") == [3]
    assert wait_loops("import time\nstart = time.monotonic()\n"
                      "while time.monotonic() - start < 5:\n    time.sleep(0.01)\n") == [3]
    assert wait_loops(WAIT.read_text()), "the helper's own loop is the shape the check finds"
    assert not wait_loops("import time\nfor _ in range(3):\n    time.sleep(1)\n")
