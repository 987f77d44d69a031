"""Scratch namespaces for probes, tests and benchmarks, named so no leftover goes unnoticed.

A scratch namespace is `fl-scratch.<pid>.<purpose>`: the context manager removes it (and ends
every process inside) however the block ends, and one killed with SIGKILL leaves a name whose
pid is dead, which `sweep_stale` removes (`labctl destroy --all` calls it).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from harness.linux.nsenter import NETNS_RUN_DIR, create_netns, list_netns, remove_netns
from harness.linux.processes import kill_and_reap, namespace_ids, pids_in_namespaces

SCRATCH_PREFIX = "fl-scratch."


def scratch_name(purpose: str) -> str:
    """This process's scratch namespace for `purpose`."""
    return f"{SCRATCH_PREFIX}{os.getpid()}.{purpose}"


def remove(names: list[str]) -> None:
    """End every process in the namespaces, then unpin them."""
    kill_and_reap(pids_in_namespaces(namespace_ids(f"{NETNS_RUN_DIR}/{n}" for n in names)))
    for name in names:
        remove_netns(name)


@contextlib.contextmanager
def scratch_netns(purpose: str) -> Iterator[str]:
    """A fresh namespace for the block; yields its name (its path is /run/netns/<name>)."""
    name = scratch_name(purpose)
    create_netns(name)
    try:
        yield name
    finally:
        remove([name])


def _owner_alive(name: str) -> bool:
    pid = name.removeprefix(SCRATCH_PREFIX).split(".", 1)[0]
    return pid.isdigit() and os.path.exists(f"/proc/{pid}")


def stale() -> list[str]:
    """Scratch namespaces whose creating process is gone."""
    return [n for n in list_netns() if n.startswith(SCRATCH_PREFIX) and not _owner_alive(n)]


def sweep_stale() -> list[str]:
    names = stale()
    remove(names)
    return names
