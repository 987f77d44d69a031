"""The project's C programs, built from the checkout by the Makefile's own rule on first use
(or when older than their source), so a fresh checkout works without a separate build step."""

from __future__ import annotations

import compileall
import subprocess
from functools import cache
from pathlib import Path

from harness.core.errors import LabError

REPO = Path(__file__).resolve().parents[2]
BUILD_DIR = REPO / "build"


@cache
def built(name: str) -> Path:
    path = BUILD_DIR / name
    out = subprocess.run(["make", "-s", "-C", str(REPO), f"build/{name}"],
                         capture_output=True, text=True)
    if out.returncode != 0 or not path.exists():
        raise LabError(f"cannot build {path}: {(out.stderr or out.stdout).strip()}; install "
                       "gcc (apt-get install build-essential) or run `make setup`")
    return path


@cache
def compiled() -> None:
    """The checkout's Python as bytecode, written once (then only what changed): a lab's
    nodes start hundreds of Python processes from it (agents, sprayers), and where the
    caller's environment says PYTHONDONTWRITEBYTECODE each would compile all it imports,
    0.15 s of CPU for a switch agent."""
    compileall.compile_dir(REPO / "harness", quiet=1)
