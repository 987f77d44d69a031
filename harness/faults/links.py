"""Link faults: a cut (both ends lose carrier, as when a fibre is pulled) and impairments."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from harness.faults.targets import LinkRef, resolve_link
from harness.topology.plan import Endpoint, Impairment

if TYPE_CHECKING:
    from harness.runtime.context import LabContext

Undo = Callable[[], None]


def _set_state(lab: LabContext, end: Endpoint, state: str) -> None:
    with lab.node(end.node).netlink() as ip:
        ip.link("set", index=ip.link_lookup(ifname=end.iface)[0], state=state)


def link_down(lab: LabContext, ref: LinkRef) -> Undo:
    link, _ = resolve_link(lab.plan, ref)
    for end in (link.a, link.b):
        _set_state(lab, end, "down")

    def undo() -> None:
        for end in (link.a, link.b):
            _set_state(lab, end, "up")
    return undo


def impair(lab: LabContext, ref: LinkRef, impairment: Impairment) -> Undo:
    """Impair the named end(s) through the link-impairment layer (netem or its fallback)."""
    from harness.links.impair import apply, clear  # the impairment layer is optional here

    _, ends = resolve_link(lab.plan, ref)
    for end in ends:
        apply(lab, end, impairment)

    def undo() -> None:
        for end in ends:
            clear(lab, end)
    return undo
