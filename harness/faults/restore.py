"""Putting the lab back from a fault's record: the same steps whichever process injected it.

Each step is safe to repeat (a link set up twice, a filter table removed that is gone), so a
`clear` that failed half-way can simply be run again. A fault with a step of its own (its
catalog entry's `restore`) takes it first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.faults import filters, steps
from harness.faults.catalog import Catalog
from harness.faults.records import Record

if TYPE_CHECKING:
    from harness.runtime.context import LabContext


def restore(lab: LabContext, record: Record, catalog: Catalog) -> None:
    undo = record.undo
    kind = catalog.kinds.get(record.kind)
    if kind is not None and kind.restore is not None and undo.own:
        kind.restore(lab, record.id, undo.own)
    for end in undo.ends_down:
        steps.set_state(lab, end, "up")
    for end in undo.impaired:
        steps.unimpair(lab, end)
    for node in undo.filters:  # before a restart: a crashed switch forwards again first
        filters.remove(lab, node, record.id)
    if undo.restart:
        steps.restart(lab, undo.restart)
    for node, peers in undo.sessions.items():
        steps.wait_established(lab, node, peers)
