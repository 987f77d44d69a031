"""Starting a node's BFD offload (fl_bfd.c) beside its bfdd, and the bfdd flag that uses it.

bfdd with `--dplaneaddr unix:SOCKET` keeps sessions, clients and CLI and hands every session
to the data plane that connects there; fl-bfd is that data plane. Its cost per session is a
share of one wake-up per round of sends instead of a wake-up per packet and timer, which is
what lets a hundred-node lab run BFD at 100 ms on two cores. The engine is a process of the node: a
crash of the node takes it down with bfdd, and the node kind's restart brings both back. A
lone engine crash is its supervisor's to mend (fl_bfd.c): it starts the engine again, which
takes bfdd's sessions over without taking them down, and says so in `fl-bfd.state`, which
`inspect` shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.core.errors import LabError

if TYPE_CHECKING:
    from harness.runtime.node import Node
    from harness.topology.plan import BfdPlan

ENGINE = "fl-bfd"  # the engine's process name; its supervisor's is fl-bfd-watch
SOCKET_NAME = "bfdd-dplane.sock"
FEED_NAME = "fl-bfd-feed.sock"
STATE_NAME = "fl-bfd.state"  # the supervisor's: "ENGINE_PID RESTARTS REASON"
TICK_DIVISOR, TICK_MIN_MS, TICK_MAX_MS = 4, 1.0, 25.0  # as in fl_bfd.c
DPLANE_PATH_MAX = 63  # bfdd (FRR 8.4) silently cuts a longer --dplaneaddr path


def socket_path(bfd_dir: Path) -> Path:
    return bfd_dir / SOCKET_NAME


def feed_path(bfd_dir: Path) -> Path:
    """Where the engine tells watchers (the spray agent) each session's state as it changes."""
    return bfd_dir / FEED_NAME


def bfdd_args(bfd_dir: Path) -> tuple[str, ...]:
    """bfdd listens here; sessions stay in bfdd's own packet loop until the engine connects."""
    path = str(socket_path(bfd_dir))
    if len(path) > DPLANE_PATH_MAX:
        raise LabError(f"{path}: longer than the {DPLANE_PATH_MAX} characters bfdd keeps")
    return ("--dplaneaddr", f"unix:{path}")


def start_engine(node: Node, bfd_dir: Path, log: Path) -> int:
    """The node's engine, connecting to its bfdd's socket (retrying until bfdd is up)."""
    runtime = node.runtime
    return runtime.spawn(node.name, [runtime.program(ENGINE), str(socket_path(bfd_dir)),
                                     str(feed_path(bfd_dir))], log, f"{node.name}/{ENGINE}")


@dataclass(frozen=True)
class EngineState:
    pid: int  # the engine's, as its node sees it
    restarts: int
    last_exit: str  # how the last engine ended ("killed-by-signal-9"), "-" before any


def engine_state(bfd_dir: Path) -> EngineState | None:
    """What the supervisor last wrote; None before it started."""
    try:
        pid, restarts, last = (bfd_dir / STATE_NAME).read_text().split()
    except (OSError, ValueError):
        return None
    return EngineState(int(pid), int(restarts), last)


def tick_ms(bfd: BfdPlan) -> float:
    """The engine's tick for a lab's BFD (fl_bfd.c: a quarter of the shortest interval, 1 to
    25 ms): how much later than bfdd's own timers a detection may come."""
    shortest = min(bfd.interval_ms, bfd.host_echo_ms or bfd.interval_ms)
    return min(max(shortest / TICK_DIVISOR, TICK_MIN_MS), TICK_MAX_MS)
