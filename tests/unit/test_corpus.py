"""Every malformed file in tests/corpus/bad is rejected with the promised message, key and line.

Each file states what it expects in its first three comment lines:
`# expect: <text in the message or fix>`, `# key: <dotted key or empty>`, `# line: <N>`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.errors import TopologyError
from harness.topology.pipeline import plan_from_file

CORPUS = sorted((Path(__file__).parent.parent / "corpus" / "bad").glob("*.yml"))


def expectations(path: Path) -> dict[str, str]:
    header = path.read_text().splitlines()[:3]
    return {k.strip("# "): v.strip() for k, _, v in (line.partition(":") for line in header)}


def test_corpus_is_big_enough() -> None:
    assert len(CORPUS) >= 20


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_bad_file_is_rejected_at_its_key(path: Path) -> None:
    want = expectations(path)
    with pytest.raises(TopologyError) as caught:
        plan_from_file(path)
    problems = caught.value.problems
    match = [p for p in problems if want["expect"] in f"{p.message} {p.fix}"]
    assert match, f"no problem mentions {want['expect']!r}: {caught.value}"
    problem = match[0]
    assert problem.file == str(path)
    assert problem.key == want["key"]
    assert problem.line == int(want["line"]), str(problem)
    assert str(path) in str(caught.value)
