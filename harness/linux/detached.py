"""An engine process that outlives whoever started it, reached on its control socket.

The switch's userspace dataplanes (fl-srv6, fl-port) keep their tables and counters across a
restart of the agent that programs them, as an ASIC's do across a switch-OS restart: a new
agent finds the engine answering and carries on with it.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

from harness.core.errors import LabError
from harness.core.wait import NotReady, wait_until

READY_TIMEOUT = 5.0
CONTROL_TIMEOUT = 2.0
REPLY_MAX = 1 << 20


class DetachedEngine:
    """An engine called `what` (for messages), reached on `control`, logging to `log`."""

    what = "engine"
    probe = "stats"  # a request any state of the engine answers

    def __init__(self, control: Path, log: Path) -> None:
        self.control = control
        self.log = log
        self.pid: int | None = None  # when this object started it

    def request(self, message: str) -> str:
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
            sock.settimeout(CONTROL_TIMEOUT)
            try:
                sock.connect(str(self.control))
                sock.send(message.encode())
                return sock.recv(REPLY_MAX).decode()
            except OSError as exc:
                raise LabError(f"{self.what} at {self.control} does not answer: {exc}") from None

    def command(self, message: str) -> None:
        reply = self.request(message)
        if reply != "ok":
            raise LabError(f"{self.what} refused `{message}`: {reply}")

    def answers(self) -> bool:
        try:
            self.request(self.probe)
            return True
        except LabError:
            return False

    def start(self, argv: list[str], netns_path: str | None) -> None:
        """Start it in its own session (it must outlive its starter) unless one answers."""
        if self.answers():
            return
        if netns_path:
            argv = ["nsenter", f"--net={netns_path}", *argv]
        with open(self.log, "a") as log:
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                       start_new_session=True, close_fds=True)
        try:
            self.wait_ready(alive=lambda: process.poll() is None)
        except LabError:
            process.kill()
            raise
        self.pid = process.pid

    def wait_ready(self, alive: Callable[[], bool] | None = None) -> None:
        """Until it answers (it binds its socket last); LabError with its log's end if it
        does not, or `alive` says it died."""
        try:
            wait_until(self.answers, READY_TIMEOUT, every=0.01, alive=alive)
        except NotReady:
            raise LabError(f"the {self.what} did not start: "
                           f"{self.log.read_text().strip()[-300:] or 'no output'}") from None
