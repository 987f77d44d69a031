"""BGP's keepalive and hold time, and BFD's interval on the BGP sessions: as asked (FRR's
datacenter 3 s / 9 s for BGP), or longer on a lab whose packets would cost more CPU than the
host has for them.

With BFD on every session, BFD finds a dead link or node within its detection time; the hold
time is left to find a peer whose bgpd hangs while its BFD engine still answers. A keepalive
costs its two bgpd processes ~0.2 ms of CPU (measured at fpf-64 on two cores: 768 a second
took 0.19 cores, 230 a second 0.065), so a lab with BFD stays within `bgp.keepalive_budget`
keepalives a second by sending each less often, up to FRR's default profile's 60 s. Decided
from the topology alone (the same file gives the same timers on every machine), said at
deploy.

BFD's control packets cost ~19 us of CPU each, sent and received (7,200 session ends at 100 ms,
72,000 packets a second, took 1.37 of two cores at idle), so a lab's sessions send at most
`bgp.bfd.budget_pps` a second together: a 504-node FPF lab every 360 ms (failures found in
1.08 s), fpf-64 as asked.
"""

from __future__ import annotations

import math

from harness.topology.schema import Bfd, BgpSettings

DATACENTER_KEEPALIVE = 3  # s, FRR's `frr defaults datacenter`, as its hold time is 3 of them
LONGEST_KEEPALIVE = 60  # s, FRR's `frr defaults traditional`
HOLD_PER_KEEPALIVE = 3  # RFC 4271 10: the suggested hold time is three keepalives


def bgp_timers(bgp: BgpSettings, session_ends: int,
               bfd_ms: int | None) -> tuple[int, int, str | None]:
    """Keepalive and hold time in seconds, and a note for deploy when the lab's size set them.

    A timer the topology gives is kept, and the other follows it; without BFD the hold time
    is what finds a failure, so it stays short however big the lab. `bfd_ms`: the lab's BFD
    interval (`bfd_interval_ms`), for the note."""
    if bgp.keepalive is not None or bgp.hold is not None:
        keepalive = bgp.keepalive or max(1, bgp.hold // HOLD_PER_KEEPALIVE)
        return keepalive, bgp.hold or keepalive * HOLD_PER_KEEPALIVE, None
    keepalive = DATACENTER_KEEPALIVE
    if bgp.bfd is not None:
        keepalive = min(LONGEST_KEEPALIVE,
                        max(keepalive, math.ceil(session_ends / bgp.keepalive_budget)))
    hold = keepalive * HOLD_PER_KEEPALIVE
    if keepalive == DATACENTER_KEEPALIVE:
        return keepalive, hold, None
    detect_ms = (bfd_ms or 0) * bgp.bfd.multiplier
    return keepalive, hold, (
        f"BGP keepalive every {keepalive} s, hold time {hold} s (not {DATACENTER_KEEPALIVE} s "
        f"and {DATACENTER_KEEPALIVE * HOLD_PER_KEEPALIVE} s): {session_ends:,} session ends "
        f"stay within {bgp.keepalive_budget} keepalives a second (bgp.keepalive_budget); BFD "
        f"finds a dead link in {detect_ms:g} ms, the hold time only a hung bgpd")


def bfd_interval_ms(bfd: Bfd, session_ends: int) -> tuple[int, str | None]:
    """BFD's transmit and receive interval in ms, and a note for deploy when the lab's size
    stretched it: every session end sends a control packet each interval."""
    asked = round(bfd.interval / 1000)
    needed = math.ceil(session_ends * 1000 / bfd.budget_pps)
    if needed <= asked:
        return asked, None
    return needed, (
        f"BFD every {needed} ms, not {asked} ms: {session_ends:,} session ends stay within "
        f"{bfd.budget_pps:,} control packets a second (bgp.bfd.budget_pps); a dead link is "
        f"found in {needed * bfd.multiplier} ms")
