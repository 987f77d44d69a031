"""How late this machine wakes a sleeping process right now: the measured load that a timing
bound adds to its mechanism's own time.

A daemon's timer (bfdd's detection timer, an agent's select) fires late when the cores are
busy, by about as much as any other process of the same priority is woken late. A thread
sleeps `period` again and again for the duration of a measurement and keeps the largest
overshoot, so a test can bound "BFD detect time + lateness" instead of a lucky constant.
With `exact`, the thread's timer slack (50 us for an ordinary process) is off, so it measures
what a kernel timer or the impairment engine (which turns its slack off too) sees.
"""

from __future__ import annotations

import ctypes
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType

PR_SET_TIMERSLACK = 29


class WakeupLateness:
    def __init__(self, period_s: float = 0.005, exact: bool = False) -> None:
        self.period_s = period_s
        self.exact = exact
        self.late_ms: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def samples(self) -> int:
        return len(self.late_ms)

    @property
    def max_ms(self) -> float:
        return max(self.late_ms, default=0.0)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.late_ms)

    def _run(self) -> None:
        if self.exact:  # per thread: only this one
            ctypes.CDLL(None).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
        while not self._stop.is_set():
            start = time.monotonic()
            time.sleep(self.period_s)
            self.late_ms.append((time.monotonic() - start - self.period_s) * 1000)

    def __enter__(self) -> WakeupLateness:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()


@contextmanager
def busy_cpus(count: int) -> Iterator[None]:
    """`count` processes spinning at normal priority for the duration: the load a CI machine
    running other jobs puts on a lab's timers."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
