"""A readable log of SAI calls, one line each, for operators learning what a switch OS does.

`create SAI_OBJECT_TYPE_ROUTE_ENTRY {vr=oid:0x3000000000001 dest=10.0.0.4/32}
SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID=oid:0x400000000000a -> SAI_STATUS_SUCCESS`. The last lines are
kept in memory; a sink (the agent's log file) receives every line.

Writing is deferred, as SONiC's sairedis recorder does: `record` only queues the call, and the
lines are formatted by `flush`, which the agent calls when it has nothing else to do (and which
reading `lines` implies). A FIB download makes tens of thousands of calls; formatting each one
on the way to the kernel took a sixth of the time a route needs to get there.
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
MAX_PENDING = 100_000  # a switch that is never idle still writes its trace in bounded steps


def _value(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value >> 48:
        return format_oid(value)
    if type(value) is tuple:  # a list attribute; keys (named tuples) write themselves
        return "[" + ",".join(_value(v) for v in value) + "]"
    return str(value)


@lru_cache(maxsize=1)
def _clock(second: int) -> str:
    """The wall clock formatted once per second, not once per SAI call."""
    return time.strftime("%H:%M:%S", time.localtime(second))


class Trace:
    def __init__(self, sink: Callable[[str], None] | None = None,
                 keep: int = TRACE_LINES) -> None:
        self._lines: deque[str] = deque(maxlen=keep)
        self._pending: list[tuple[float, str, Any, Any, dict[str, Any], Status, str]] = []
        self.sink = sink
        self.calls = 0
        self.failures = 0

    def record(self, api: str, what: Any, target: Any, attrs: dict[str, Any],
               status: Status, note: str = "", when: float | None = None) -> None:
        """Queue one call; `what` (an object type) and `target` (an OID or entry key) are
        written as the trace shows them when the line is formatted. The entries of a bulk
        call share its time."""
        self.calls += 1
        if status is not Status.SUCCESS:
            self.failures += 1
        self._pending.append((when or time.time(), api, what, target, attrs, status, note))
        if len(self._pending) >= MAX_PENDING:
            self.flush()

    @property
    def pending(self) -> int:
        return len(self._pending)

    def flush(self) -> None:
        for when, api, what, target, attrs, status, note in self._pending:
            shown = " ".join(f"{k}={_value(v)}" for k, v in attrs.items())
            line = (f"{_clock(int(when))} {api} {what} {_value(target)}"
                    f"{' ' + shown if shown else ''} -> {status}{f' ({note})' if note else ''}")
            self._lines.append(line)
            if self.sink is not None:
                self.sink(line)
        self._pending.clear()

    @property
    def lines(self) -> deque[str]:
        self.flush()
        return self._lines
