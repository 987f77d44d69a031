"""A cut link: both ends lose carrier, as when a fibre is pulled; `link_up` puts it back."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.faults.injector import FaultKind, Verb, link_argument
from harness.faults.steps import set_state
from harness.faults.targets import LinkRef, resolve_link

if TYPE_CHECKING:
    from harness.faults.records import Undo
    from harness.runtime.context import LabContext


def inject(lab: LabContext, fault_id: int, undo: Undo, link: LinkRef) -> None:
    plan, _ = resolve_link(lab.plan, link)
    for end in (plan.a, plan.b):
        undo.ends_down.append(end)
        set_state(lab, end, "down")


def target(lab: LabContext, link: LinkRef) -> str:
    return resolve_link(lab.plan, link)[0].name


FAULTS = (FaultKind("link_down", inject, target, undone_by="link_up"),)
VERBS = (
    Verb("link-down", "cut a link: both ends lose carrier", link_argument,
         lambda faults, args: faults.link_down(args.link), again=lambda a: f"link-up {a.link}"),
    Verb("link-up", "bring a cut link back", link_argument,
         lambda faults, args: faults.link_up(args.link), undoes=True),
)
