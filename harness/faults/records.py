"""The records of what is injected into a lab right now, kept in the lab dir
(`faults/<id>.json`) so any shell, test or operator, can list it and put it back.

A record holds its undo as data - which nodes carry the fault's packet filter, which link ends
it took down, which node to restart - not as a closure, so the process that undoes a fault need
not be the one that injected it. Ids are claimed by creating the record's file, so two shells
injecting at once never share one (a node's filter table is named after the id).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from harness.linux.files import replace_file
from harness.topology.plan import Endpoint

STATE_DIR = "faults"


class Undo(BaseModel):
    """The steps that put the lab back, filled in as the fault is injected step by step, so a
    fault that fails half-way is undone as far as it got."""

    model_config = ConfigDict(extra="forbid")

    filters: list[str] = Field(default_factory=list)  # nodes holding table fl_fault_<id>
    ends_down: list[Endpoint] = Field(default_factory=list)  # to set up again
    impaired: list[Endpoint] = Field(default_factory=list)  # to clear
    restart: str | None = None  # the node whose processes were killed
    sessions: dict[str, list[str]] = Field(default_factory=dict)  # node -> peers to wait for
    own: dict[str, Any] = Field(default_factory=dict)  # a fault's own step (its `restore`)


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: int
    kind: str
    target: str
    injected_at: float  # wall clock: when, for another shell
    undo: Undo = Field(default_factory=Undo)

    def __str__(self) -> str:
        return f"{self.kind}({self.target})"


def state_dir(lab_dir: Path) -> Path:
    return lab_dir / STATE_DIR


def _path(lab_dir: Path, fault_id: int) -> Path:
    return state_dir(lab_dir) / f"{fault_id}.json"


def claim_id(lab_dir: Path) -> int:
    """The lowest free id above every one in use, its file created empty (O_EXCL)."""
    directory = state_dir(lab_dir)
    directory.mkdir(parents=True, exist_ok=True)
    used = [int(p.stem) for p in directory.glob("*.json") if p.stem.isdigit()]
    fault_id = max(used, default=0) + 1
    while True:
        try:
            os.close(os.open(_path(lab_dir, fault_id), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return fault_id
        except FileExistsError:
            fault_id += 1


def save(lab_dir: Path, record: Record) -> None:
    replace_file(_path(lab_dir, record.id), record.model_dump_json(indent=1))


def remove(lab_dir: Path, fault_id: int) -> None:
    _path(lab_dir, fault_id).unlink(missing_ok=True)


def load_all(lab_dir: Path) -> list[Record]:
    """Every fault in place, oldest first; an id claimed by an injection still running (an
    empty file) is not one yet."""
    records = []
    for path in state_dir(lab_dir).glob("*.json"):
        with contextlib.suppress(FileNotFoundError, ValueError):
            records.append(Record.model_validate_json(path.read_text()))
    return sorted(records, key=lambda r: r.id)
