"""Nodes start only while the host has memory for them: a lab too big for the machine stops
with an error that says so, instead of waking the OOM killer (which kills the biggest
processes, the host's own among them).

Before a node starts, the memory available must exceed a tenth of the host's plus what the
node will take. When it does not, a lab that shares memory waits: KSM gives memory back as it
merges the nodes already started (a page merges on the second scan that finds it unchanged),
and the starts that outran it pause until it has. The deploy fails, and rolls back, once two
of KSM's full scans pass without memory coming back, or at once when nothing would give any.
Measured: 504 nodes started without this ran the host down to 434 MiB free.
"""

from __future__ import annotations

import math
import threading

from harness.core.errors import LabError
from harness.core.wait import wait_until
from harness.linux import ksm
from harness.topology.plan import LabPlan, NodePlan

POLL_S = 0.5
SCANS_WITHOUT_GAIN = 2


class MemoryRoom:
    """One per deploy, shared by the start workers: while one waits, the others queue."""

    def __init__(self, plan: LabPlan, holder: str) -> None:
        """`holder`: the lab's directory, which holds KSM while the lab shares memory."""
        self.plan = plan
        self.holder = holder
        self.reserve_mib = ksm.RESERVE_SHARE * ksm.meminfo_mib("MemTotal")
        self.started = 0
        self._lock = threading.Lock()

    def wait(self, node: NodePlan) -> None:
        need = ksm.MIB_PER_FRR_NODE if node.runs_frr else 0
        with self._lock:
            best, scans = ksm.mem_available_mib(), ksm.full_scans()
            if best < self.reserve_mib + need and self.plan.share_memory:
                ksm.start_merging(self.holder)  # at the deploy's rate, whatever another lab set
            gain = [best, scans]  # the most available so far, and the full scans then

            def available() -> float:
                """What is available; no room is an error once memory stops growing."""
                mib = ksm.mem_available_mib()
                if mib > gain[0]:
                    gain[:] = [mib, ksm.full_scans()]
                elif mib < self.reserve_mib + need and (
                        not self.plan.share_memory or
                        ksm.full_scans() - gain[1] >= SCANS_WITHOUT_GAIN):
                    raise LabError(self._no_room(node, mib, need))
                return mib

            wait_until(available, math.inf, every=POLL_S,
                       until=lambda mib: mib >= self.reserve_mib + need)
            self.started += 1

    def _no_room(self, node: NodePlan, available: float, need: int) -> str:
        why = ("even shared: KSM merged nothing more over two full scans" if
               self.plan.share_memory else
               "and its memory is not shared (`--share-memory on` merges what nodes hold alike)")
        return (f"{self.plan.name} does not fit this host's memory, {why}: before starting "
                f"{node.name} ({self.started} of {len(self.plan.nodes)} nodes started) "
                f"{available:.0f} MiB were available, and a start needs ~{need} MiB above the "
                f"{self.reserve_mib:.0f} MiB kept free for the host. Deploy fewer nodes "
                "(`--node-filter`, a smaller generated fabric) or use a bigger machine")
