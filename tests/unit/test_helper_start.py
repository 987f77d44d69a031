"""Starting a helper tells a busy one (a slow or emulated CPU) from a stuck one: both are
silent at the timeout, only the stuck one is idle."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from harness.core.errors import LabError
from harness.runtime.context import BUSY_EXTENSIONS, LabContext

TIMEOUT_S = 0.5


class LocalRuntime:
    """Helpers as plain child processes: the part of a runtime start_helper uses."""

    def __init__(self) -> None:
        self.children: dict[int, subprocess.Popen] = {}

    def spawn(self, node: str, argv: Sequence[str], log: Path, what: str) -> int:
        child = subprocess.Popen(argv, stdout=log.open("a"), stderr=subprocess.STDOUT)
        self.children[child.pid] = child
        return child.pid

    def host_pid(self, node: str, pid: int) -> int | None:
        return pid if self.children[pid].poll() is None else None


@pytest.fixture
def context(tmp_path: Path) -> Iterator[LabContext]:
    runtime = LocalRuntime()
    yield LabContext(plan=None, dir=tmp_path, runtime=runtime, journal=None)  # type: ignore[arg-type]
    for child in runtime.children.values():
        child.kill()
        child.wait()


def start(context: LabContext, tmp_path: Path, program: str) -> None:
    ready = tmp_path / "ready"

    def answer() -> bool:
        if not ready.exists():
            raise LabError("not yet")
        return True

    context.start_helper("n1", [sys.executable, "-c", program.format(ready=ready)], "helper",
                         tmp_path / "out", tmp_path / "log", answer, TIMEOUT_S)


def test_a_helper_busy_past_its_timeout_gets_more_time(context, tmp_path: Path) -> None:
    # spins for three timeouts, then answers
    start(context, tmp_path, "import time, pathlib\nend = time.monotonic() + 1.5\n"
          "while time.monotonic() < end: pass\npathlib.Path('{ready}').touch()\n"
          "time.sleep(60)")


def test_an_idle_silent_helper_fails_at_its_timeout(context, tmp_path: Path) -> None:
    with pytest.raises(LabError, match=r"n1: the helper did not start \(silent after 0\.\d s "
                                       r"\(0\.\d CPU s used\)\); see .*log"):
        start(context, tmp_path, "import time\ntime.sleep(60)")


def test_a_helper_busy_for_ever_fails_after_the_extensions(context, tmp_path: Path) -> None:
    with pytest.raises(LabError, match="silent after"):
        start(context, tmp_path, "while True: pass")
    assert BUSY_EXTENSIONS * TIMEOUT_S < 10  # what the test just waited, at most


def test_a_helper_that_exits_fails_at_once(context, tmp_path: Path) -> None:
    with pytest.raises(LabError, match=r"did not start \(exited\)"):
        start(context, tmp_path, "print('no config'); raise SystemExit(1)")
