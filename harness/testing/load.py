"""How late this machine wakes a sleeping process right now: the measured load that a timing
bound adds to its mechanism's own time.

A daemon's timer (bfdd's detection timer, an agent's select) fires late when the cores are
busy, by about as much as any other process of the same priority is woken late. A thread
sleeps `period` again and again for the duration of a measurement and keeps the largest
overshoot, so a test can bound "BFD detect time + lateness" instead of a lucky constant.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType


class WakeupLateness:
    def __init__(self, period_s: float = 0.005) -> None:
        self.period_s = period_s
        self.samples = 0
        self.max_ms = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            start = time.monotonic()
            time.sleep(self.period_s)
            late_ms = (time.monotonic() - start - self.period_s) * 1000
            self.max_ms = max(self.max_ms, late_ms)
            self.samples += 1

    def __enter__(self) -> WakeupLateness:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
