"""The one way to wait for something: ask until the answer is good, for at most a timeout.

Like FRR topotests' `run_and_expect`, it sits at the ground floor, so a runtime waiting for a
container, an engine waiting for its socket and a test waiting for BGP all wait alike: the
same deadline arithmetic, and a failure that says what was still missing. The "ready, or the
process died" form (`alive`) gives up as soon as what it waits on is gone, instead of
sleeping out the timeout beside a dead helper.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from harness.core.errors import LabError

T = TypeVar("T")
POLL_S = 0.2


class NotReady(LabError):
    """Still not good at the timeout, or the process waited on died first (`died`); `last`
    is the last answer (None where the probe raised one of the retried exceptions)."""

    def __init__(self, last: Any, died: bool, timeout: float) -> None:
        super().__init__("what it waited on died" if died else
                         f"not ready within {timeout:g} s (last answer: {last!r})")
        self.last, self.died = last, died


def wait_until(probe: Callable[[], T], timeout: float,
               failure: Callable[[T | None], BaseException] | None = None, *,
               every: float = POLL_S, until: Callable[[T], object] = bool,
               retry: type[BaseException] | tuple[type[BaseException], ...] = (),
               alive: Callable[[], bool] | None = None) -> T:
    """Call `probe` every `every` seconds until `until(answer)` holds; return that answer.

    An exception of a `retry` type counts as "not yet". Past `timeout`, or once `alive()`
    says false, raise `failure(last answer)` (NotReady without one)."""
    deadline = time.monotonic() + timeout
    while True:
        last: T | None = None
        try:
            last = probe()
        except retry:
            pass
        else:
            if until(last):
                return last
        died = alive is not None and not alive()
        if died or time.monotonic() > deadline:
            raise (failure(last) if failure else NotReady(last, died, timeout)) from None
        time.sleep(every)


def none_left(pending: object) -> bool:
    """`until` for a probe that answers with what is still missing: done once it is empty."""
    return not pending
