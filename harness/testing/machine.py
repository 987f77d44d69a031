"""What the machine gave a test: the CPU time its hypervisor took (steal) and the time
runnable tasks waited for a CPU (pressure stall information), read from /proc around a test.

The labs' engines keep an emulated wire's time only while they get a CPU. A timing test that
fails while the VM's host took the cores, or while the cores were oversubscribed, failed on
the machine, not on the mechanism; the plugin prints this beside every failure to tell which.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from harness.linux.cpu import STEAL, TICK, machine_ticks

CPU_PRESSURE = Path("/proc/pressure/cpu")


@dataclass(frozen=True)
class CpuShare:
    wall_s: float
    steal_s: float  # all CPUs' time the hypervisor ran something else
    waited_s: float | None  # time some runnable task waited for a CPU; None: no PSI here

    @classmethod
    def now(cls) -> CpuShare:
        return cls(time.monotonic(), machine_ticks()[STEAL] / TICK, _pressure_s())

    def since(self, start: CpuShare) -> CpuShare:
        waited = (None if self.waited_s is None or start.waited_s is None
                  else self.waited_s - start.waited_s)
        return CpuShare(self.wall_s - start.wall_s, self.steal_s - start.steal_s, waited)

    def describe(self) -> str:
        cpus = os.cpu_count() or 1
        text = (f"{self.wall_s:.1f} s; the hypervisor took {self.steal_s:.2f} s of the "
                f"{cpus} CPUs' {self.wall_s * cpus:.1f} s (steal)")
        if self.waited_s is not None:
            text += (f"; some runnable task waited for a CPU during {self.waited_s:.2f} s "
                     f"({100 * self.waited_s / max(self.wall_s, 1e-9):.0f}% of the time)")
        return text


def _pressure_s() -> float | None:
    """The "some" total of CPU pressure, in seconds (the kernel counts microseconds)."""
    try:
        some = CPU_PRESSURE.read_text().split("\n", 1)[0]
    except OSError:
        return None
    return int(some.rsplit("total=", 1)[1]) / 1e6
