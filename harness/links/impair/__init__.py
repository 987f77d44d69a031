"""Link impairments: delay, jitter, loss, duplication and rate on the egress of an endpoint.

The API the deploy stage, `labctl netem` and the fault harness use:

- `apply(lab, endpoint, impairment) -> backend name`: set (or change live) what the egress of
  `endpoint` does to packets. A clean impairment clears the endpoint and returns "none".
- `clear(lab, endpoint)`: back to a clean wire.
- `show(lab) -> list[ImpairmentRow]`: what is in place, which backend really carries it, and
  whether it is still healthy.

An impairment is one direction. A link's impairment from the topology file is applied to the
egress of both ends, as containerlab and netem do, so its RTT grows by twice the delay.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.core.errors import LabError
from harness.links.impair import state as states
from harness.links.impair.backend import BACKENDS, select_backend
from harness.topology.plan import Endpoint, Impairment

if TYPE_CHECKING:
    from harness.runtime.context import LabContext

MAX_DELAY_US = 10_000_000.0  # 10 s: beyond this it is a partition, not a long-haul link


@dataclass(frozen=True)
class ImpairmentRow:
    lab: str
    endpoint: Endpoint
    backend: str
    impairment: Impairment
    health: str
    counters: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {"lab": self.lab, "endpoint": str(self.endpoint), "backend": self.backend,
                "impairment": self.impairment.model_dump(), "health": self.health,
                "counters": self.counters}


def check(lab: LabContext, endpoint: Endpoint, impairment: Impairment) -> None:
    """Reject an unknown endpoint or an impossible value before anything is touched."""
    node = lab.node(endpoint.node)
    names = [i.name for i in node.plan.interfaces]
    if endpoint.iface not in names:
        raise LabError(f"{endpoint}: {endpoint.node} has no link interface {endpoint.iface!r};"
                       f" it has: {', '.join(names) or 'none'}")
    problems = [f"{key} {value} is out of range ({allowed})" for key, value, ok, allowed in (
        ("delay", impairment.delay_us, 0 <= impairment.delay_us <= MAX_DELAY_US, "0 to 10s"),
        ("jitter", impairment.jitter_us, 0 <= impairment.jitter_us <= MAX_DELAY_US, "0 to 10s"),
        ("loss", impairment.loss_pct, 0 <= impairment.loss_pct <= 100, "0% to 100%"),
        ("duplicate", impairment.duplicate_pct, 0 <= impairment.duplicate_pct <= 100,
         "0% to 100%"),
        ("rate", impairment.rate_bps, impairment.rate_bps is None or impairment.rate_bps >= 8000,
         "at least 8kbit"),
        *_lossless_problems(impairment),
    ) if not ok]
    if problems:
        raise LabError(f"{endpoint}: " + "; ".join(problems) + "; nothing was changed")


def _lossless_problems(impairment: Impairment) -> list[tuple[str, object, bool, str]]:
    pfc = impairment.lossless
    if pfc is None:
        return []
    return [("lossless class without rate", impairment.rate_bps, bool(impairment.rate_bps),
             "a line rate to pause"),
            ("xoff", pfc.xoff, pfc.xoff > 0, "at least 1 byte"),
            ("headroom", pfc.headroom, pfc.headroom >= 0, "0 or more bytes"),
            ("drain", pfc.drain_bps, pfc.drain_bps >= 8000, "at least 8kbit"),
            ("dscp", pfc.dscp, pfc.dscp is None or 0 <= pfc.dscp <= 63, "0 to 63")]


def apply(lab: LabContext, endpoint: Endpoint, impairment: Impairment) -> str:
    check(lab, endpoint, impairment)
    if impairment.is_clean:
        clear(lab, endpoint)
        return "none"
    backend = select_backend(impairment)
    previous = states.load(lab.dir, endpoint)
    if previous and previous.backend != backend.name:
        clear(lab, endpoint)
        previous = None
    states.save(lab.dir, backend.apply(lab, endpoint, impairment, previous))
    return backend.name


def revive(lab: LabContext, node: str) -> list[Endpoint]:
    """Each of `node`'s impaired link ends as it was before the node crashed: a crash kills
    every process in the node, the userspace engines among them, and a link whose engine is
    gone carries nothing one way (its egress still goes to the engine's TAP)."""
    ends = [s for s in states.load_all(lab.dir) if s.endpoint.node == node]
    for state in ends:
        apply(lab, state.endpoint, state.impairment)  # a live engine: a no-op update
    return [s.endpoint for s in ends]


def clear(lab: LabContext, endpoint: Endpoint) -> None:
    current = states.load(lab.dir, endpoint)
    if current is not None:
        BACKENDS[current.backend].clear(lab, current)
        states.remove(lab.dir, endpoint)


@contextlib.contextmanager
def temporarily(lab: LabContext, endpoints: Iterable[Endpoint],
                impairment: Impairment) -> Iterator[None]:
    """`impairment` on each endpoint for the block; then each back to what its link plans."""
    ends = list(endpoints)
    try:
        for end in ends:
            apply(lab, end, impairment)
        yield
    finally:
        for end in ends:
            apply(lab, end, lab.plan.link_at(end).impairment)


def clear_all(lab: LabContext) -> list[Endpoint]:
    cleared = [s.endpoint for s in states.load_all(lab.dir)]
    for endpoint in cleared:
        clear(lab, endpoint)
    return cleared


def show(lab: LabContext) -> list[ImpairmentRow]:
    rows = []
    for current in states.load_all(lab.dir):
        try:
            health, counters = BACKENDS[current.backend].health(lab, current)
        except LabError as exc:
            health, counters = f"broken: {exc}", {}
        rows.append(ImpairmentRow(lab.plan.name, current.endpoint, current.backend,
                                  current.impairment, health, counters))
    return rows

