"""One interface, two ways to impair a link; the kernel decides which one a host uses.

`tc netem` where sch_netem exists, otherwise the userspace engine behind a tc redirect. The
choice is made by probing (harness/linux/features.py), never assumed, and every state file records
the backend that really applied it. FABRIC_LAB_IMPAIR=userspace forces the userspace path on a
netem kernel (to compare the two); forcing netem where it does not exist is an error.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Protocol

from harness.core.errors import LabError
from harness.links.impair.netem import NetemBackend
from harness.links.impair.state import LinkState
from harness.links.impair.userspace import UserspaceBackend
from harness.linux.features import feature
from harness.topology.plan import Endpoint, Impairment

if TYPE_CHECKING:
    from harness.runtime.context import LabContext

CHOICE_ENV = "FABRIC_LAB_IMPAIR"


class Backend(Protocol):
    name: str

    def apply(self, lab: LabContext, endpoint: Endpoint, impairment: Impairment,
              previous: LinkState | None) -> LinkState:
        """Put `impairment` on the endpoint's egress (create or change in place)."""

    def clear(self, lab: LabContext, state: LinkState) -> None:
        """Remove what `apply` put there; tolerate parts that are already gone."""

    def health(self, lab: LabContext, state: LinkState) -> tuple[str, dict[str, int]]:
        """('active' | 'broken: why', counters) for what `state` says is running."""


BACKENDS: dict[str, Backend] = {b.name: b for b in (NetemBackend(), UserspaceBackend())}


def select_backend(impairment: Impairment | None = None) -> Backend:
    """netem where the kernel has it, else the userspace engine; a lossless class always
    takes the engine (Linux has no PFC)."""
    choice = os.environ.get(CHOICE_ENV, "auto")
    netem, redirect = feature("netem"), feature("tc_redirect")
    if impairment is not None and impairment.lossless:
        if choice == "netem":
            raise LabError(f"{CHOICE_ENV}=netem: netem has no lossless class (PFC); "
                           "unset it to let the userspace engine carry it")
        choice = "userspace"
    if choice == "netem" or (choice == "auto" and netem.available):
        if not netem.available:
            raise LabError(f"{CHOICE_ENV}=netem but this kernel has no sch_netem "
                           f"({netem.detail}); unset it to use the userspace path")
        return BACKENDS["netem"]
    if choice not in ("auto", "userspace"):
        raise LabError(f"{CHOICE_ENV}={choice!r}: use auto, netem or userspace")
    if not redirect.available:
        raise LabError(f"no way to impair links: no sch_netem ({netem.detail}) and no tc "
                       f"mirred redirect ({redirect.detail})")
    return BACKENDS["userspace"]


def describe_path() -> str:
    """What `labctl doctor` prints: the path impaired links will take on this host, and why."""
    try:
        backend = select_backend()
    except LabError as exc:
        return f"none: {exc}"
    if backend.name == "netem":
        return "netem (kernel tc netem, tbf for rate)"
    return ("userspace (tc mirred redirect to the fl-impair engine; "
            + ("forced by " + CHOICE_ENV if feature("netem").available else
               "the kernel has no sch_netem") + ")")
