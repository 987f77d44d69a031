"""Find and end the processes that live in a set of network namespaces."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable

from harness.core.wait import NotReady, none_left, wait_until


def namespace_ids(paths: Iterable[str]) -> set[tuple[int, int]]:
    ids = set()
    for path in paths:
        with contextlib.suppress(OSError):
            st = os.stat(path)
            ids.add((st.st_dev, st.st_ino))
    return ids


def pids_in_namespaces(ids: set[tuple[int, int]]) -> list[int]:
    """Every process whose network namespace is one of `ids` (nsfs dev/inode pairs)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            st = os.stat(f"/proc/{entry}/ns/net")
            if (st.st_dev, st.st_ino) in ids:
                found.append(int(entry))
    return found


def kill_and_reap(pids: Iterable[int], sig: signal.Signals = signal.SIGKILL,
                  timeout: float = 30.0) -> list[int]:
    """Signal every pid and wait until all are gone; return those still there at `timeout`
    (a process stuck in the kernel), so a caller can say so instead of returning early."""
    pending = set(pids) - {os.getpid()}
    for pid in pending:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)

    def left() -> set[int]:
        for pid in list(pending):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)  # our own children must be reaped to vanish
            if not os.path.exists(f"/proc/{pid}") or _is_zombie(pid):
                pending.discard(pid)
        return pending

    with contextlib.suppress(NotReady):
        wait_until(left, timeout, every=0.02, until=none_left)
    return sorted(pending)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
