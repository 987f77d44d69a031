"""How late a real-time thread wakes on this machine: what no emulated port's response budget
can cover (docs/congestion.md, the pause window).

One SCHED_FIFO process pinned to each CPU sleeps SLEEP_US at a time, as the engines do between
frames, and notes how far past its due time each wake-up came, on an otherwise idle machine:
the median, the worst, and how many per second came more than 0.5 ms and 1 ms late. Python
adds tens of microseconds to every wake-up; stalls of milliseconds are the machine's.

    sudo .venv/bin/python bench/wakeups.py [--seconds S]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import time

from harness.testing.load import WakeupLateness

SLEEP_US = 200
PRIORITY = 20  # above every engine's: nothing of the lab's own delays it


def sleeper(cpu: int, seconds: float, results: multiprocessing.Queue) -> None:
    """On `cpu` at PRIORITY, the lateness of every wake-up over `seconds` (its thread
    inherits both)."""
    os.sched_setaffinity(0, {cpu})
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(PRIORITY))
    with WakeupLateness(SLEEP_US / 1e6, exact=True) as late:
        time.sleep(seconds)
    results.put((cpu, [ms / 1000 for ms in late.late_ms]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    results: multiprocessing.Queue = multiprocessing.Queue()
    workers = [multiprocessing.Process(target=sleeper, args=(cpu, args.seconds, results))
               for cpu in sorted(os.sched_getaffinity(0))]
    for worker in workers:
        worker.start()
    rows = sorted(results.get() for _ in workers)
    for worker in workers:
        worker.join()
    print(f"a SCHED_FIFO thread sleeping {SLEEP_US} us at a time, {args.seconds:g} s per CPU:")
    for cpu, late in rows:
        print(f"  cpu {cpu}: {len(late)} wake-ups, late by {statistics.median(late) * 1e6:.0f} us "
              f"(median), {max(late) * 1e3:.2f} ms at worst; "
              f"{sum(s > 0.5e-3 for s in late) / args.seconds:.1f}/s more than 0.5 ms late, "
              f"{sum(s > 1e-3 for s in late) / args.seconds:.1f}/s more than 1 ms")


if __name__ == "__main__":
    main()
