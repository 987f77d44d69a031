"""The host NIC's data-plane path check (fl_probe.c): the spray agent runs it and acts on what
it says, tens of milliseconds after a plane stops delivering, where BFD takes its detection time
and BGP its timers. BFD and BGP remain the backstop, and decide when a plane may return.

Each multi-plane host sends every peer host one probe per plane every `interval` (a round);
the receiver declares a plane silent once `misses` newer rounds came in on other planes, and
lossy once it lost `drain` of the last `window` rounds the other planes delivered; it tells the
sender in its own probes, and the sender's agent takes the plane out of its spray set to that
peer. Judging planes against each other, not against a clock, keeps a stalled CPU from
draining anything. See docs/design.md for the false-positive rate under random loss.
"""

from __future__ import annotations

import math
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from harness.spray.ruleset import MARK_BASE
from harness.topology.plan import ProbePlan

ENGINE = "fl-probe"
PORT = 7471
MIN_WINDOW = 20  # rounds: fewer cannot tell a lossy plane from bad luck
MIN_DRAIN = 2  # lost rounds: one is bad luck on any plane


@dataclass(frozen=True)
class Timing:
    """The probe schedule a lab runs: as configured, unless the lab is too big for it."""

    interval_us: int
    misses: int
    window: int  # rounds loss is counted over
    drain: int  # lost rounds in the window that drain a plane
    configured_us: int

    @property
    def detect_ms(self) -> float:
        """A plane that stops delivering leaves the sender's spray set within this, plus how
        late the two engines wake: the last round before the failure went out up to an
        interval earlier, `misses` rounds later the receiver knows, and its next round tells
        the sender."""
        return (self.misses + 1) * self.interval_us / 1000

    @property
    def stretched(self) -> bool:
        return self.interval_us > self.configured_us

    def describe(self, hosts: int) -> str:
        text = (f"spray probes: a round every {self.interval_us / 1000:g} ms, a plane drained "
                f"after {self.misses} missed rounds or {self.drain} lost of {self.window}")
        if self.stretched:
            text += (f" (not every {self.configured_us / 1000:g} ms: {hosts} hosts probing each "
                     "other on every plane stay within the lab's probe budget)")
        return text


def timing(probes: ProbePlan, hosts: int, planes: int) -> Timing:
    """Every host probes every other on every plane each round; the lab's probes per second
    stay within its budget by probing less often, never by probing fewer paths."""
    streams = hosts * (hosts - 1) * planes
    interval = max(probes.interval_us, math.ceil(streams * 1e6 / probes.budget_pps))
    window = max(round(probes.window_us / interval), MIN_WINDOW)
    return Timing(interval_us=interval, misses=probes.misses, window=window,
                  drain=max(MIN_DRAIN, math.ceil(window * probes.drain_pct / 100)),
                  configured_us=probes.interval_us)


@dataclass(frozen=True)
class Verdict:
    """What a peer says about one of this host's planes towards it."""

    peer: str  # the peer's IPv4 GPU address
    plane: int
    reason: str | None  # "silent" or "loss" while drained; None once restored


def command(program: str, schedule: Timing, source: str, planes: dict[str, int],
            peers: Sequence[str]) -> list[str]:
    """The engine's argv (its usage line is in fl_probe.c)."""
    return [program, str(PORT), str(schedule.interval_us), str(schedule.misses),
            str(schedule.window), str(schedule.drain), hex(MARK_BASE), source,
            *(f"{p}={nic}" for nic, p in sorted(planes.items())), "--", *peers]


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
