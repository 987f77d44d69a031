"""An append-only record of everything a deploy creates, written before it is created.

If deploy is killed with SIGKILL at any point, `destroy` replays this file (plus a sweep by
namespace prefix) and removes exactly what exists. Each line is one JSON object.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path


def process_start_time(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat: tells a live process from a recycled PID. None for a
    zombie too: it has exited, and whether its parent reaps it soon (an orphan's init in a
    container may not) says nothing of the process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] == "Z" else int(fields[19])


@dataclass(frozen=True)
class ProcessRecord:
    pid: int
    start_time: int
    what: str

    def alive(self) -> bool:
        return process_start_time(self.pid) == self.start_time


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path

    def _append(self, entry: dict[str, object]) -> None:
        line = json.dumps(entry) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def runtime(self, name: str) -> None:
        self._append({"runtime": name})

    def netns(self, name: str) -> None:
        self._append({"netns": name})

    def container(self, name: str) -> None:
        self._append({"container": name})

    def path_outside_lab(self, path: Path) -> None:
        self._append({"path": str(path)})

    def process(self, pid: int, what: str) -> None:
        start = process_start_time(pid)
        if start is not None:
            self._append({"pid": pid, "start_time": start, "what": what})

    def entries(self) -> list[dict[str, object]]:
        try:
            lines = self.path.read_text().splitlines()
        except FileNotFoundError:
            return []
        entries = []
        for line in lines:
            try:
                entries.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line torn by SIGKILL mid-write
        return entries

    def runtime_name(self) -> str | None:
        return next((str(e["runtime"]) for e in self.entries() if "runtime" in e), None)

    def namespaces(self) -> list[str]:
        return [str(e["netns"]) for e in self.entries() if "netns" in e]

    def containers(self) -> list[str]:
        return [str(e["container"]) for e in self.entries() if "container" in e]

    def paths(self) -> list[Path]:
        return [Path(str(e["path"])) for e in self.entries() if "path" in e]

    def processes(self) -> list[ProcessRecord]:
        return [ProcessRecord(int(e["pid"]), int(e["start_time"]), str(e["what"]))  # type: ignore[arg-type]
                for e in self.entries() if "pid" in e]
