"""Memory that every node of a big lab holds alike, stored once: kernel samepage merging (KSM).

Past a hundred nodes a lab's memory is its limit: an FRR node with its agent holds ~50 MiB of
its own, and most of it is the same bytes in every node (bgpd's command graph, the agents'
imported modules). A lab that shares memory starts its nodes' processes through fl-mergeable
(which says what makes their pages match), and KSM's thread, `ksmd`, merges them while any
such lab exists. Measured on fpf-64 (bench/scale.py --share-memory on off): 15.3 MiB PSS per
node against 49.3, with ksmd at 0.05 of a core once the lab idles.

KSM's switches are the host's, so they are changed under a lock, the host's own values saved
in the labs root first; destroying the last lab that shares memory puts them back (a reboot
clears both). KSM merges only processes that asked for it: nothing else of the host changes.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

from harness.build import built
from harness.errors import LabError
from harness.paths import labs_root
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
SAVED = "ksm-host-settings.json"  # in the labs root, while a lab shares memory
# ksmd is a kernel thread at nice 5: while 500 nodes started it got 2% of a core, merged
# nothing new for minutes, and memory ran out. At the lowest real-time priority (below
# fl-bfd's and fl-impair's) it takes what a batch costs and sleeps sleep_millisecs between
# batches: ~0.15 of a core while fpf-64 merged.
KSMD_PRIORITY = 1
# An FRR node's memory unshared (PSS: fpf-64 49.4 MiB, 336 nodes 56.4): what `auto` reckons.
MIB_PER_FRR_NODE = 56
AUTO_SHARE_OF_AVAILABLE = 0.25
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
    if choice == "auto" and need <= AUTO_SHARE_OF_AVAILABLE * available:
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


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[Path]:
    """The file holding the host's own KSM settings, with every other lab's change held off."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "ksm.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield root / SAVED


def start_merging(ksm: Path = KSM, root: Path | None = None,
                  ksmd: Callable[[], list[int]] = merging_thread) -> None:
    """Run ksmd for the lab's processes: the host's settings saved first, once for all labs."""
    with _locked(root or labs_root()) as saved:
        if not saved.exists():  # the first lab that shares memory: keep the host's values
            host: dict[str, object] = {key: (ksm / key).read_text().strip() for key in SETTINGS}
            host["ksmd"] = [scheduling(pid) for pid in ksmd()]
            tmp = saved.with_suffix(f".{os.getpid()}")
            tmp.write_text(json.dumps(host))
            tmp.rename(saved)
        (ksm / "pages_to_scan").write_text(str(DEPLOY_PAGES_TO_SCAN))
        (ksm / "run").write_text("1")
        for pid in ksmd():
            os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(KSMD_PRIORITY))


def merge_slowly(ksm: Path = KSM, root: Path | None = None) -> None:
    """The idle rate, once a lab's deploy is over (a later start that must wait for memory
    calls start_merging again)."""
    with _locked(root or labs_root()) as saved:
        if saved.exists():  # still ours
            (ksm / "pages_to_scan").write_text(str(IDLE_PAGES_TO_SCAN))


def stop_merging(still_sharing: Callable[[], bool], ksm: Path = KSM, root: Path | None = None,
                 ksmd: Callable[[], list[int]] = merging_thread) -> None:
    """Put the host's KSM settings back once no lab shares memory (merged pages stay merged
    until their processes exit; `run` 0 only stops the thread). `still_sharing` is asked
    only when there is something to put back, under the lock."""
    root = root or labs_root()
    if not (root / SAVED).exists():  # nothing of ours to undo
        return
    with _locked(root) as saved:
        if not saved.exists() or still_sharing():
            return
        host = json.loads(saved.read_text())
        for key in SETTINGS:
            (ksm / key).write_text(host[key])
        for pid, (policy, priority) in zip(ksmd(), host["ksmd"], strict=False):
            os.sched_setscheduler(pid, policy, os.sched_param(priority))
        saved.unlink()
