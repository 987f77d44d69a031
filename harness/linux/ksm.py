"""Memory that every node of a big lab holds alike, stored once: kernel samepage merging (KSM).

Past a hundred nodes a lab's memory is its limit: an FRR node with its agent holds ~50 MiB of
its own, and most of it is the same bytes in every node (bgpd's command graph, the agents'
imported modules). A lab that shares memory starts its nodes' processes through fl-mergeable
(which says what makes their pages match), and KSM's thread, `ksmd`, merges them while any
such lab exists. Measured on fpf-64 (bench/scale.py --share-memory on off): 15.3 MiB PSS per
node against 49.3, with ksmd at 0.05 of a core once the lab idles.

KSM's switches and ksmd's scheduling are the host's: they have one owner whatever the labs
root (linux/hostwide.py), the host's own values saved before the first lab changes them, and
destroying the last lab that shares memory puts them back. KSM merges only processes that
asked for it: nothing else of the host changes.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from harness.core.build import built
from harness.core.errors import LabError
from harness.linux import hostwide
from harness.topology.plan import LabPlan

KSM = Path("/sys/kernel/mm/ksm")
TOOL = "fl-mergeable"
# Pages scanned per wake-up (every sleep_millisecs, 20 by default). While nodes start, fast
# enough to keep up with them: fpf-64 merged within a minute of its deploy, ksmd taking
# ~0.15 of a core (504 nodes: 0.2). Once the lab converged, what is left to merge is what
# changes slowly (routes, sessions), and the rate drops to what costs little: it scans
# whether or not anything merges.
DEPLOY_PAGES_TO_SCAN = 1000
IDLE_PAGES_TO_SCAN = 200
SETTINGS = ("run", "pages_to_scan")
# ksmd is a kernel thread at nice 5: while 500 nodes started it got 2% of a core, merged
# nothing new for minutes, and memory ran out. At the lowest real-time priority (below
# fl-bfd's and fl-port's) it takes what a batch costs and sleeps sleep_millisecs between
# batches: ~0.15 of a core while fpf-64 merged.
KSMD_PRIORITY = 1
# An FRR node's memory unshared (PSS: fpf-64 49.4 MiB, 336 nodes 56.4): what `auto` reckons.
MIB_PER_FRR_NODE = 56
# Of the host's memory, kept free for the host and the labs' kernel state (deploy's memory
# room and doctor's capacity).
RESERVE_SHARE = 0.10
AUTO_SHARE_OF_AVAILABLE = 0.25
# Below this many FRR nodes `auto` never shares: sharing changes the host (ksmd at real-time
# priority, address-space randomisation off in the lab's processes), and a small lab, the
# default one above all, must not do that unasked; one that does not fit is refused instead.
AUTO_MIN_FRR_NODES = 100
CHOICES = ("auto", "on", "off")


def unsupported(ksm: Path = KSM) -> str | None:
    """Why this host cannot share a lab's memory, or None: KSM must be built in, and the merge
    flag must survive execve (Linux 6.4 added it, 6.7 keeps it across exec)."""
    if not (ksm / "run").exists():
        return f"this kernel has no KSM ({ksm} is missing: CONFIG_KSM)"
    out = subprocess.run([str(built(TOOL)), "cat", "/proc/self/ksm_stat"],
                         capture_output=True, text=True)
    if "ksm_merge_any: yes" not in out.stdout:
        return ("this kernel does not keep a process's KSM flag across exec "
                f"({out.stderr.strip() or 'no ksm_merge_any in /proc/self/ksm_stat'})")
    return None


@cache
def merging_thread() -> list[int]:
    """The pid of the kernel's `ksmd` (its CPU is what sharing a lab's memory costs): a
    kernel thread's, fixed until the host reboots."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            name, _, rest = Path(f"/proc/{pid}/stat").read_text().partition(" (")[2].rpartition(")")
            if name == "ksmd" and rest.split()[1] == "2":  # a child of kthreadd
                found.append(int(pid))
    return found


def scheduling(pid: int) -> tuple[int, int]:
    """A thread's scheduling policy and real-time priority."""
    return os.sched_getscheduler(pid), os.sched_getparam(pid).sched_priority


def full_scans(ksm: Path = KSM) -> int:
    """How many times ksmd has been through all mergeable memory (0 without KSM)."""
    try:
        return int((ksm / "full_scans").read_text())
    except OSError:
        return 0


def meminfo_mib(field: str) -> float:
    """A line of /proc/meminfo (MemAvailable, MemTotal), in MiB."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise LabError(f"/proc/meminfo has no {field}")


def mem_available_mib() -> float:
    return meminfo_mib("MemAvailable")


def decide(plan: LabPlan, choice: str, runtime_can: str | None) -> tuple[bool, str | None]:
    """Whether the lab shares memory, and what to tell the user about it. `runtime_can` is
    None when the runtime starts nodes through fl-mergeable, else why it cannot."""
    if choice not in CHOICES:
        raise LabError(f"--share-memory {choice!r}: one of {', '.join(CHOICES)}")
    if choice == "off":
        return False, None
    frr_nodes = sum(node.runs_frr for node in plan.nodes)
    need, available = frr_nodes * MIB_PER_FRR_NODE, mem_available_mib()
    if choice == "auto" and (frr_nodes < AUTO_MIN_FRR_NODES
                             or need <= AUTO_SHARE_OF_AVAILABLE * available):
        return False, None
    why = runtime_can or unsupported()
    if why:
        if choice == "on":
            raise LabError(f"cannot share {plan.name}'s memory: {why}; deploy with "
                           "--share-memory off")
        return False, (f"memory not shared: its {frr_nodes} FRR nodes need ~{need / 1024:.1f} "
                       f"GiB of the {available / 1024:.1f} available, and {why}")
    return True, (f"memory shared (KSM): ~{need / 1024:.1f} GiB unshared for {frr_nodes} FRR "
                  f"nodes, {available / 1024:.1f} GiB available; node processes run without "
                  "address-space randomisation so their pages match (--share-memory off "
                  "keeps it)")


@dataclass(frozen=True)
class Ksmd:
    """The kernel's merging thread: where it is and how it is scheduled (tests stand in)."""

    pids: Callable[[], list[int]] = merging_thread
    get: Callable[[int], tuple[int, int]] = scheduling
    set: Callable[[int, int, int], None] = lambda pid, policy, priority: \
        os.sched_setscheduler(pid, policy, os.sched_param(priority))


KSMD = Ksmd()


def setting(ksm: Path = KSM, ksmd: Ksmd = KSMD) -> hostwide.Setting:
    """KSM's switches and ksmd's scheduling, as one host-wide setting (linux/hostwide.py)."""
    def read() -> dict[str, object]:
        return {**{key: (ksm / key).read_text().strip() for key in SETTINGS},
                "ksmd": [ksmd.get(pid) for pid in ksmd.pids()]}

    def write(host: dict[str, object]) -> None:
        for key in SETTINGS:
            (ksm / key).write_text(str(host[key]))
        for pid, (policy, priority) in zip(ksmd.pids(), host["ksmd"], strict=False):  # type: ignore[call-overload]
            ksmd.set(pid, policy, priority)
    return hostwide.Setting("ksm", read, write)


def start_merging(holder: str, ksm: Path = KSM, where: Path = hostwide.HOST_DIR,
                  ksmd: Ksmd = KSMD) -> None:
    """Run ksmd fast for `holder`'s processes (a lab directory); the host's settings are saved
    first, once for every lab of every labs root."""
    def fast() -> None:
        (ksm / "pages_to_scan").write_text(str(DEPLOY_PAGES_TO_SCAN))
        (ksm / "run").write_text("1")
        for pid in ksmd.pids():
            ksmd.set(pid, os.SCHED_FIFO, KSMD_PRIORITY)
    hostwide.hold(setting(ksm, ksmd), holder, fast, where)


def merge_slowly(ksm: Path = KSM, where: Path = hostwide.HOST_DIR) -> None:
    """The idle rate, once a lab's deploy is over (a later start that must wait for memory
    calls start_merging again); nothing when no lab holds KSM."""
    hostwide.if_held(setting(ksm), lambda: (ksm / "pages_to_scan").write_text(
        str(IDLE_PAGES_TO_SCAN)), where)


def stop_merging(holder: str | None, ksm: Path = KSM, where: Path = hostwide.HOST_DIR,
                 ksmd: Ksmd = KSMD) -> bool:
    """`holder` no longer shares memory (None: sweep holders whose lab is gone); the host's
    settings come back with the last one (merged pages stay merged until their processes
    exit; `run` 0 only stops the thread)."""
    return hostwide.release(setting(ksm, ksmd), holder, lambda h: Path(h).is_dir(), where)
