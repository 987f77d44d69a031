"""An impairment (delay, jitter, loss, rate) on a link's end(s), through the link layer's
netem or its userspace engine. From the shell it is `labctl netem`; here it is a fault a
test can inject and undo with the others."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.faults.injector import FaultKind
from harness.faults.targets import LinkRef, resolve_link
from harness.links import impair as link_impairment
from harness.topology.plan import Impairment

if TYPE_CHECKING:
    from harness.faults.records import Undo
    from harness.runtime.context import LabContext


def inject(lab: LabContext, fault_id: int, undo: Undo, link: LinkRef,
           impairment: Impairment | None = None, **values: Any) -> None:
    """impair('leaf1:eth1', delay_us=500, loss_pct=1), or with an Impairment."""
    wanted = impairment or Impairment(**values)
    for end in resolve_link(lab.plan, link)[1]:
        undo.impaired.append(end)
        link_impairment.apply(lab, end, wanted)


def target(lab: LabContext, link: LinkRef, impairment: Impairment | None = None,
           **values: Any) -> str:
    return ",".join(map(str, resolve_link(lab.plan, link)[1]))


FAULTS = (FaultKind("impair", inject, target),)
