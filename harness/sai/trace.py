"""A readable log of SAI calls, one line each, for operators learning what a switch OS does.

`create SAI_OBJECT_TYPE_ROUTE_ENTRY {vr=oid:0x3000000000001 dest=10.0.0.4/32}
SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID=oid:0x400000000000a -> SAI_STATUS_SUCCESS`. The last lines are
kept in memory; a sink (the agent's log file) receives every line.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from harness.sai.status import Status
from harness.sai.types import format_oid

TRACE_LINES = 2000


def _value(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value >> 48:
        return format_oid(value)
    if isinstance(value, tuple):
        return "[" + ",".join(_value(v) for v in value) + "]"
    return str(value)


@lru_cache(maxsize=1)
def _clock(second: int) -> str:
    """The wall clock formatted once per second, not once per SAI call."""
    return time.strftime("%H:%M:%S", time.localtime(second))


class Trace:
    def __init__(self, sink: Callable[[str], None] | None = None,
                 keep: int = TRACE_LINES) -> None:
        self.lines: deque[str] = deque(maxlen=keep)
        self.sink = sink
        self.calls = 0
        self.failures = 0

    def record(self, api: str, what: str, target: str, attrs: dict[str, Any],
               status: Status, note: str = "") -> None:
        self.calls += 1
        if not status.ok:
            self.failures += 1
        shown = " ".join(f"{k}={_value(v)}" for k, v in attrs.items())
        line = (f"{_clock(int(time.time()))} {api} {what} {target}"
                f"{' ' + shown if shown else ''} -> {status}{f' ({note})' if note else ''}")
        self.lines.append(line)
        if self.sink is not None:
            self.sink(line)
