"""A file replaced whole: written beside its place, then renamed over it, so a reader (or a
process killed half-way) sees the old content or the new, never a part."""

from __future__ import annotations

import os
from pathlib import Path


def replace_file(path: Path, text: str) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
