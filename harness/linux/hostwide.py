"""Host-wide settings a lab changes have one owner on the host, whatever the labs root.

KSM's switches and ksmd's scheduling (linux/ksm.py), the neighbour tables' limits
(kernel.py): every namespace and every labs root (`FABRIC_LAB_ROOT`) shares them. The first
lab that needs a setting changed saves the host's own values here, under a lock; every lab
relying on the change is recorded as a holder (its directory); when the last holder is gone
(destroyed, or its directory removed after a crash), the host's values are put back. Two labs
roots used to keep two copies, and destroying them in one order left ksmd running fast.

The record lives in /run, a tmpfs: a reboot clears it together with the settings it guards.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.linux.files import replace_file

HOST_DIR = Path("/run/fabric-lab")


@dataclass(frozen=True)
class Setting:
    name: str  # the record's file name
    read: Callable[[], dict[str, Any]]  # the host's values as they are now
    write: Callable[[dict[str, Any]], None]  # put values in place


@dataclass
class _Record:
    host: dict[str, Any]  # the values before the first holder changed them
    holders: list[str]


@contextlib.contextmanager
def _locked(setting: Setting, where: Path) -> Iterator[tuple[Path, _Record | None]]:
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"{setting.name}.json"
    with open(where / f"{setting.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record = _Record(**json.loads(path.read_text())) if path.exists() else None
        yield path, record


def _write(path: Path, record: _Record) -> None:
    replace_file(path, json.dumps({"host": record.host, "holders": sorted(set(record.holders))}))


def hold(setting: Setting, holder: str, change: Callable[[], None],
         where: Path = HOST_DIR) -> None:
    """Record `holder` (the host's values saved first if nobody holds the setting), then make
    the change, all under the lock."""
    with _locked(setting, where) as (path, record):
        record = record or _Record(setting.read(), [])
        if holder not in record.holders:
            record.holders.append(holder)
        _write(path, record)
        change()


def holders(setting: Setting, where: Path = HOST_DIR) -> list[str]:
    path = where / f"{setting.name}.json"
    return _Record(**json.loads(path.read_text())).holders if path.exists() else []


def if_held(setting: Setting, change: Callable[[], None], where: Path = HOST_DIR) -> bool:
    """Make `change` only while some lab holds the setting (it is ours to change)."""
    if not (where / f"{setting.name}.json").exists():
        return False
    with _locked(setting, where) as (_, record):
        if record is not None:
            change()
        return record is not None


def release(setting: Setting, holder: str | None, alive: Callable[[str], bool],
            where: Path = HOST_DIR) -> bool:
    """Drop `holder` (None: only the holders that are gone), and any holder `alive` says is
    gone; once none is left, put the host's values back. Returns whether they were."""
    if not (where / f"{setting.name}.json").exists():  # nothing of ours to undo
        return False
    with _locked(setting, where) as (path, record):
        if record is None:
            return False
        record.holders = [h for h in record.holders if h != holder and alive(h)]
        if record.holders:
            _write(path, record)
            return False
        setting.write(record.host)
        path.unlink()
        return True
