"""The host NIC's data-plane path check (fl_probe.c): the spray agent runs it and acts on what
it says, tens of milliseconds after a plane stops delivering, where BFD takes its detection time
and BGP its timers. BFD and BGP remain the backstop, and decide when a plane may return.

Each multi-plane host sends every peer host one probe per plane every `interval` (a round); the
receiver declares a plane silent once `misses` newer rounds came in on other planes, and lossy
once it lost `drain` more of the last `window` rounds than the typical plane (the median) did;
it tells the sender in its own probes, and the sender's agent takes the plane out of its spray
set to that peer. Judging planes against each other, not against a clock, keeps a stalled CPU
from draining anything. The README (FPF lab) gives the false-positive rate under random loss.

This module runs in the node (the agent's side: no pydantic there); the lab's schedule and the
engine's command line are harness/spray/schedule.py's.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass

ENGINE = "fl-probe"
PORT = 7471
EVERY_PEER = "*"  # a verdict's peer when the plane is drained towards every destination


@dataclass(frozen=True)
class Verdict:
    """What a peer says about one of this host's planes towards it."""

    peer: str  # the peer's IPv4 GPU address, or EVERY_PEER
    plane: int
    reason: str | None  # "silent" or "loss" while drained; None once restored


def parse(line: str) -> Verdict:
    """'PEER PLANE drain silent|loss' or 'PEER PLANE restore'."""
    peer, plane, action, *reason = line.split()
    return Verdict(peer, int(plane), reason[0] if action == "drain" else None)


class ProbeEngine:
    """The engine as the agent's child: its verdicts arrive as lines on a pipe. It dies with
    the agent (PR_SET_PDEATHSIG); if it dies alone, its verdicts go with it."""

    def __init__(self, argv: list[str]) -> None:
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE)
        assert self.process.stdout is not None
        self.fd = self.process.stdout.fileno()
        os.set_blocking(self.fd, False)
        self.pending = b""

    def fileno(self) -> int:
        return self.fd

    def read(self) -> list[Verdict] | None:
        """Verdicts that arrived; None once the engine exited."""
        try:
            data = os.read(self.fd, 65536)
        except BlockingIOError:
            return []
        if not data:
            self.process.wait()
            return None
        *lines, self.pending = (self.pending + data).split(b"\n")
        return [parse(line.decode()) for line in lines if line]
