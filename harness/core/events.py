"""A lab's record of what changed and when: one JSON line per event, in the lab's directory
(`events/SOURCE.jsonl`), read back merged in time order by `labctl events`, tests and the
nightly report, so all three see the same record.

Whoever sees a change writes it: labctl's own processes (a fault applied or undone, a flow's
losses, an exercise's checks, a deploy converged), the lab's recorder
(harness/instruments/recorder.py: links, routes, BFD and BGP sessions) and the switches' SAI
agents and platform daemons (their alarms, `Alarms`). Each source has its file,
and a line goes in one O_APPEND write, so two shells that inject faults at once never interleave
one. The ground floor, as the wait helper is: every layer that sees a change can say it.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

EVENTS_DIR = "events"
LAB_SOURCE = "lab"  # labctl's processes; the recorder writes "recorder"


@dataclass(frozen=True)
class Event:
    """`t`: wall-clock seconds (every namespace and container shares the clock); `node`: None
    for the lab as a whole; `kind` names the subject (fault, flow, link, routes, bfd, bgp,
    deploy, exercise), `what` the change (applied, undone, up, down, ...), `detail` the rest."""

    t: float
    kind: str
    what: str
    node: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        """One JSON line; a lab-wide event has no node, and detail keys with no value go."""
        data = asdict(self)
        data["detail"] = {k: v for k, v in self.detail.items() if v is not None}
        return json.dumps({k: v for k, v in data.items() if v or k == "t"},
                          separators=(",", ":")) + "\n"

    def text(self) -> str:
        """One line for people: local time to the µs, node, kind, change, details."""
        stamp = datetime.datetime.fromtimestamp(self.t).strftime("%H:%M:%S.%f")
        detail = " ".join(f"{k}={v}" for k, v in self.detail.items() if v is not None)
        return f"{stamp}  {self.node or '-':<12} {self.kind:<9} {self.what:<10} {detail}"

    @classmethod
    def parse(cls, line: str) -> Event:
        data = json.loads(line)
        return cls(t=data["t"], kind=data["kind"], what=data["what"], node=data.get("node"),
                   detail=data.get("detail", {}))


def in_time_order(events: Iterable[Event]) -> list[Event]:
    return sorted(events, key=lambda e: e.t)


def events_dir(lab_dir: Path) -> Path:
    return lab_dir / EVENTS_DIR


def record(lab_dir: Path, events: Iterable[Event], source: str = LAB_SOURCE) -> None:
    """Append `events` to the source's file in one write. A lab whose directory is gone (being
    destroyed) records nothing."""
    text = "".join(e.line() for e in events)
    if not text or not lab_dir.is_dir():
        return
    directory = events_dir(lab_dir)
    directory.mkdir(exist_ok=True)
    fd = os.open(directory / f"{source}.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def say(lab_dir: Path, kind: str, what: str, node: str | None = None, **detail: Any) -> None:
    """One event, now."""
    say_at(lab_dir, time.time(), kind, what, node, **detail)


def say_at(lab_dir: Path, t: float, kind: str, what: str, node: str | None = None,
           **detail: Any) -> None:
    """One event that happened at wall-clock `t` (said once its outcome is known)."""
    record(lab_dir, [Event(t, kind, what, node, detail)])


def _lines(path: Path) -> Iterator[Event]:
    with path.open() as f:
        for line in f:
            if line.endswith("\n"):  # a line still being written is read next time
                yield Event.parse(line)


def read(lab_dir: Path) -> list[Event]:
    """Every event of the lab, oldest first. A source writes some events late (the recorder
    says a batch of route changes once it ends), so its file is not quite in order."""
    return in_time_order(e for path in sorted(events_dir(lab_dir).glob("*.jsonl"))
                         for e in _lines(path))


class Follower:
    """New events as they are written: each poll returns what every source appended since."""

    def __init__(self, lab_dir: Path, *, from_start: bool) -> None:
        self.directory = events_dir(lab_dir)
        self.offsets: dict[Path, int] = {}
        if not from_start:
            for path in self.directory.glob("*.jsonl"):
                self.offsets[path] = path.stat().st_size

    def poll(self) -> list[Event]:
        """In time order within a poll; one written late comes after what was printed."""
        found: list[Event] = []
        for path in sorted(self.directory.glob("*.jsonl")):
            with contextlib.suppress(FileNotFoundError), path.open("rb") as f:
                f.seek(self.offsets.get(path, 0))
                data = f.read()
                whole = data[:data.rfind(b"\n") + 1]
                self.offsets[path] = self.offsets.get(path, 0) + len(whole)
                found += [Event.parse(line) for line in whole.decode().splitlines()]
        return in_time_order(found)


class Alarms:
    """A daemon's alarms as events: each raised once, with its text then, and cleared once.
    Alarms are keyed, since a text carries a reading that moves (a sensor's temperature, a
    count of failed routes) while the alarm stays the same one."""

    def __init__(self, lab_dir: Path | None, node: str, by: str) -> None:
        self.lab_dir, self.node, self.by = lab_dir, node, by
        self.raised: dict[str, str] = {}

    def update(self, now: dict[str, str]) -> None:
        if self.lab_dir is None:
            return
        t = time.time()
        changes = [Event(t, "alarm", "raised", self.node,
                         {"by": self.by, "alarm": key, "text": text})
                   for key, text in now.items() if key not in self.raised]
        changes += [Event(t, "alarm", "cleared", self.node, {"by": self.by, "alarm": key})
                    for key in self.raised if key not in now]
        record(self.lab_dir, changes, f"{self.by}.{self.node}")
        self.raised = dict(now)
