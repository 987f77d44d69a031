"""A lab's probe schedule (harness/spray/probe.py) and the engine's command line: decided at
deploy, where the plan is, from the topology's `spray.probes` and the lab's size."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from harness.spray.probe import PORT
from harness.spray.ruleset import MARK_BASE
from harness.topology.plan import ProbePlan

MIN_WINDOW = 20  # rounds: fewer cannot tell a lossy plane from bad luck
MIN_DRAIN = 2  # lost rounds: one is bad luck on any plane


@dataclass(frozen=True)
class Timing:
    """The probe schedule a lab runs: as configured, unless the lab is too big for it."""

    interval_us: int
    misses: int
    window: int  # rounds loss is counted over
    drain: int  # lost rounds in the window, beyond the typical plane's, that drain a plane
    configured_us: int
    backstop_ms: float  # how soon BFD (or, without it, the BGP hold time) finds a dead plane

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

    @property
    def off(self) -> bool:
        """Stretched so far that BFD would find a dead plane first: the probes would cost the
        lab CPU and find nothing sooner, so they do not run."""
        return self.stretched and self.detect_ms >= self.backstop_ms

    def describe(self, hosts: int) -> str:
        budget = (f"{hosts} hosts probing each other on every plane within the lab's probe "
                  "budget")
        if self.off:
            return (f"spray probes off: {budget} would find a dead plane in "
                    f"{self.detect_ms:g} ms, no sooner than BFD's {self.backstop_ms:g} ms")
        text = (f"spray probes: a round every {self.interval_us / 1000:g} ms, a plane drained "
                f"after {self.misses} missed rounds or {self.drain} more lost of {self.window} "
                "than the typical plane")
        if self.stretched:
            text += f" (not every {self.configured_us / 1000:g} ms: {budget})"
        return text


def timing(probes: ProbePlan, hosts: int, planes: int, backstop_ms: float) -> Timing:
    """Every host probes every other on every plane each round; the lab's probes per second
    stay within its budget by probing less often, never by probing fewer paths."""
    streams = hosts * (hosts - 1) * planes
    interval = max(probes.interval_us, math.ceil(streams * 1e6 / probes.budget_pps))
    window = max(round(probes.window_us / interval), MIN_WINDOW)
    return Timing(interval_us=interval, misses=probes.misses, window=window,
                  drain=max(MIN_DRAIN, math.ceil(window * probes.drain_pct / 100)),
                  configured_us=probes.interval_us, backstop_ms=backstop_ms)


def command(program: str, schedule: Timing, source: str, planes: dict[str, int],
            peers: Sequence[str]) -> list[str]:
    """The engine's argv (its usage line is in fl_probe.c)."""
    return [program, str(PORT), str(schedule.interval_us), str(schedule.misses),
            str(schedule.window), str(schedule.drain), hex(MARK_BASE), source,
            *(f"{p}={nic}" for nic, p in sorted(planes.items())), "--", *peers]
