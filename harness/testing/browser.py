"""Headless Chromium (Debian's `chromium`) for tests that look at what a person would see:
a page's DOM after its scripts ran (real text metrics and layout), or a screenshot."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from harness.core.errors import LabError

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--virtual-time-budget=2000")  # scripts run before the DOM or picture is taken


def _chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        raise LabError("chromium is not installed: apt-get install chromium (make test does)")
    return found


def dump_dom(page: Path, timeout: float = 60) -> str:
    """The page's DOM once its scripts ran."""
    out = subprocess.run([_chromium(), *FLAGS, "--dump-dom", page.resolve().as_uri()],
                         capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise LabError(f"chromium could not load {page}: {out.stderr.strip()[-500:]}")
    return out.stdout


def screenshot(page: Path, png: Path, width: int = 1400, height: int = 900,
               timeout: float = 60) -> Path:
    out = subprocess.run([_chromium(), *FLAGS, f"--screenshot={png}",
                          f"--window-size={width},{height}", page.resolve().as_uri()],
                         capture_output=True, text=True, timeout=timeout, cwd=png.parent)
    if out.returncode != 0 or not png.exists():
        raise LabError(f"chromium took no screenshot of {page}: {out.stderr.strip()[-500:]}")
    return png
