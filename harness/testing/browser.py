"""Headless Chromium (Debian's `chromium`) for tests that look at what a person would see:
a page's DOM after its scripts ran (real text metrics and layout), a screenshot, or a live page
driven over the DevTools protocol (`LivePage`), for a page that changes as a lab does."""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

import websocket

from harness.core.errors import LabError
from harness.core.wait import wait_until
from harness.linux.processes import kill_and_reap

START_S = 30.0

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars")
ONCE = (*FLAGS, "--virtual-time-budget=2000")  # scripts run before the DOM or picture is taken


def _chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        raise LabError("chromium is not installed: apt-get install chromium (make test does)")
    return found


def dump_dom(page: Path, timeout: float = 60) -> str:
    """The page's DOM once its scripts ran."""
    out = subprocess.run([_chromium(), *ONCE, "--dump-dom", page.resolve().as_uri()],
                         capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise LabError(f"chromium could not load {page}: {out.stderr.strip()[-500:]}")
    return out.stdout


def screenshot(page: Path, png: Path, width: int = 1400, height: int = 900,
               timeout: float = 60) -> Path:
    out = subprocess.run([_chromium(), *ONCE, f"--screenshot={png}",
                          f"--window-size={width},{height}", page.resolve().as_uri()],
                         capture_output=True, text=True, timeout=timeout, cwd=png.parent)
    if out.returncode != 0 or not png.exists():
        raise LabError(f"chromium took no screenshot of {page}: {out.stderr.strip()[-500:]}")
    return png


def in_group(pgid: int) -> list[int]:
    """Every process of the process group `pgid`."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if os.getpgid(int(entry)) == pgid:
                found.append(int(entry))
    return found


class LivePage:
    """One page open in a headless Chromium that keeps running: its scripts run in real time,
    and `evaluate` asks the page itself (its DOM as it is now)."""

    def __init__(self, url: str, width: int = 1400, height: int = 900) -> None:
        self.profile = tempfile.TemporaryDirectory(prefix="fl-chromium-")
        self.proc = subprocess.Popen(
            [_chromium(), *FLAGS, "--remote-debugging-port=0",
             f"--user-data-dir={self.profile.name}", f"--window-size={width},{height}", url],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.ids = itertools.count(1)
        try:
            port_file = Path(self.profile.name) / "DevToolsActivePort"
            port = wait_until(lambda: int(port_file.read_text().split()[0]), START_S,
                              retry=(OSError, ValueError, IndexError),
                              alive=lambda: self.proc.poll() is None)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list") as answer:
                target = next(t for t in json.load(answer) if t["type"] == "page")
            self.socket = websocket.create_connection(target["webSocketDebuggerUrl"],
                                                      timeout=START_S)
        except BaseException:
            self.close()
            raise

    def _call(self, method: str, **params: Any) -> dict[str, Any]:
        ask = next(self.ids)
        self.socket.send(json.dumps({"id": ask, "method": method, "params": params}))
        while True:
            answer = json.loads(self.socket.recv())
            if answer.get("id") == ask:
                if "error" in answer:
                    raise LabError(f"chromium: {method}: {answer['error']}")
                return answer["result"]

    def evaluate(self, expression: str) -> Any:
        result = self._call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    def screenshot(self, png: Path) -> Path:
        png.write_bytes(base64.b64decode(self._call("Page.captureScreenshot")["data"]))
        return png

    def close(self) -> None:
        """Chromium's whole process group goes (its renderers outlive a killed browser and go
        on writing into the profile), then the profile."""
        if getattr(self, "socket", None) is not None:
            self.socket.close()
        kill_and_reap([self.proc.pid, *in_group(self.proc.pid)])
        self.profile.cleanup()

    def __enter__(self) -> LivePage:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
