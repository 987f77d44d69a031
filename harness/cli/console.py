"""The consoles labctl prints to: a terminal's own width, or wide enough for tables in logs."""

from __future__ import annotations

import os
import sys

from rich.console import Console

LOG_WIDTH = 160  # piped output (CI logs, `make lab | tee`) would otherwise be cut at 80


def make_console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else int(os.environ.get("COLUMNS", LOG_WIDTH))
    return Console(stderr=stderr, width=width, emoji=False)  # ":100:" in an address is no emoji
