"""containerlab's `binds`: `SRC:DST[:ro|rw]`, SRC relative to the topology file's folder.

A node's FRR files are found through its binds as an FRR image would see them: the file bound
at /etc/frr/frr.conf, or frr.conf inside the folder bound at /etc/frr.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ConfigDict

MODES = ("ro", "rw", "z", "Z")


class Bind(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str  # absolute path on the host
    target: str  # absolute path inside the node
    read_only: bool = False

    def __str__(self) -> str:
        return f"{self.source}:{self.target}{':ro' if self.read_only else ''}"


def parse_bind(text: str, base: Path) -> Bind:
    """Raises ValueError with the fix when `text` is not a usable bind."""
    parts = text.split(":")
    if len(parts) not in (2, 3) or not all(parts[:2]):
        raise ValueError(f"bind {text!r} is not SRC:DST or SRC:DST:ro")
    source, target = parts[0], parts[1]
    modes = parts[2].split(",") if len(parts) == 3 else []
    if any(m not in MODES for m in modes):
        raise ValueError(f"bind {text!r} has mode {parts[2]!r}; use ro or rw")
    if not target.startswith("/"):
        raise ValueError(f"bind {text!r}: the target {target!r} must be an absolute path")
    path = (base / Path(source).expanduser()).resolve()
    if not path.exists():
        raise ValueError(f"bind source {path} does not exist")
    return Bind(source=str(path), target=str(PurePosixPath(target)), read_only="ro" in modes)


def bound_file(binds: list[Bind], target: str) -> Path | None:
    """The host file a node sees at `target`: bound itself, or inside a bound folder."""
    wanted = PurePosixPath(target)
    for bind in sorted(binds, key=lambda b: -len(b.target)):  # most specific first
        mount = PurePosixPath(bind.target)
        if wanted == mount:
            return Path(bind.source)
        if mount in wanted.parents and Path(bind.source).is_dir():
            candidate = Path(bind.source) / wanted.relative_to(mount)
            return candidate if candidate.exists() else None
    return None
