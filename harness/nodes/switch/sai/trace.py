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

from harness.nodes.switch.sai.status import Status
from harness.nodes.switch.sai.types import format_oid

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


# what (an object type), target (an OID or entry key), attributes, a note on the call
Call = tuple[Any, Any, dict[str, Any], str]


class Trace:
    def __init__(self, sink: Callable[[str], None] | None = None,
                 keep: int = TRACE_LINES) -> None:
        self._lines: deque[str] = deque(maxlen=keep)
        # Calls waiting to be written: (time, api, calls, their statuses, note of a failure).
        self._pending: list[tuple[float, str, list[Call], list[Status], str]] = []
        self.sink = sink
        self.calls = 0
        self.failures = 0
        self._written = 0

    @property
    def pending(self) -> int:
        return self.calls - self._written

    def record(self, api: str, what: Any, target: Any, attrs: dict[str, Any],
               status: Status, note: str = "") -> None:
        """Queue one call; `what` (an object type) and `target` (an OID or entry key) are
        written as the trace shows them when the line is formatted."""
        self.record_bulk(api, [(what, target, attrs, note)], [status])

    def record_bulk(self, api: str, calls: list[Call], statuses: list[Status],
                    failure_note: str = "") -> None:
        """Queue the calls of one bulk call, one line each, all at its time; a failed call
        without a note of its own gets `failure_note`."""
        self.calls += len(calls)
        self.failures += len(statuses) - statuses.count(Status.SUCCESS)
        self._pending.append((time.time(), api, calls, statuses, failure_note))
        if self.pending >= MAX_PENDING:
            self.flush()

    def flush(self) -> None:
        for when, api, calls, statuses, failure_note in self._pending:
            clock = _clock(int(when))
            for (what, target, attrs, note), status in zip(calls, statuses, strict=True):
                shown = " ".join(f"{k}={_value(v)}" for k, v in attrs.items())
                if not note and status is not Status.SUCCESS:
                    note = failure_note
                line = (f"{clock} {api} {what} {_value(target)}{' ' + shown if shown else ''}"
                        f" -> {status}{f' ({note})' if note else ''}")
                self._lines.append(line)
                if self.sink is not None:
                    self.sink(line)
        self._written = self.calls
        self._pending.clear()

    @property
    def lines(self) -> deque[str]:
        self.flush()
        return self._lines
