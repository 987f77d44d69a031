"""Putting the lab back from a fault's record: the same steps whichever process injected it.

Each step is safe to repeat (a link set up twice, a filter table removed that is gone), so a
`clear` that failed half-way can simply be run again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.faults import filters, links, nodes
from harness.faults.registry import Undo

if TYPE_CHECKING:
    from harness.runtime.context import LabContext


def restore(lab: LabContext, fault_id: int, undo: Undo) -> None:
    for end in undo.ends_down:
        links.set_state(lab, end, "up")
    for end in undo.impaired:
        links.unimpair(lab, end)
    for node in undo.filters:  # before a restart: a crashed switch forwards again first
        filters.remove(lab, node, fault_id)
    if undo.restart:
        nodes.restart(lab, undo.restart)
    for node, peers in undo.sessions.items():
        nodes.wait_established(lab, node, peers)
