"""BAG: lossless long-haul links, the all-reduce latency cliff, and damping's reuse time, from
one run on bag-mini.

1. Lossless, exercised: the BAG switches measure their 2, 40 and 400 km cables; on one link of
   each length the far end then bursts RoCE-marked datagrams (DSCP 26) at line rate into a
   BAG port that forwards them at a twentieth of it (congested). The userspace link engine
   plays PFC (fl_impair.c): XOFF past a threshold, the PAUSE reaching the sender one cable
   later, headroom above XOFF. With headroom from the measured length nothing is dropped;
   with headroom for a 2 km cable on the 40 km link, frames are. Line rate is the engine's
   (100 Mbit/s), the headroom formula (sai/headroom.py) the same as the switches use at
   their port speed; beside it, what provisioning every port for the longest cable reserves.
2. The latency cliff: with 5 ms one way between the regions, eight replicas all-reduce with a
   flat ring and hierarchically; completion time (against the physics bound: one-way delays
   crossed in a row) and bytes crossing BAG (interface counters).
3. With --reuse: a long-haul bundle flaps ten times in a minute with damping on; how long
   until the suppressed routes are used again (RFC 2439's defaults: tens of minutes), with
   FRR's own forecast beside it. The nightly runs it; CI asserts suppression only.

Usage: .venv/bin/python bench/bag.py [--reuse] [--lab NAME]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

from harness.cli.headroom import measure as measure_cables
from harness.core.errors import LabError
from harness.core.wait import wait_until
from harness.deploy.lab import Lab, deploy, destroy_lab
from harness.faults.steps import flap_bundle
from harness.links import impair
from harness.nodes.switch.sai.headroom import for_km
from harness.topology.plan import Endpoint, Impairment, Lossless
from harness.topology.schema import Role
from harness.traffic.burst import lossless_burst
from harness.traffic.job import measure

ROOT = Path(__file__).resolve().parents[1]
LINE_BPS, DRAIN_BPS, XOFF, MTU = 100_000_000, 5_000_000, 30_000, 1500
ROCE_DSCP, BURST, PAYLOAD = 26, 600, 1400  # RoCE's usual DSCP
INTER_REGION_US, ALLREDUCE_BYTES, ITERATIONS = 5000.0, 64 << 10, 12
def lossless(lab: Lab) -> None:
    rows = measure_cables(lab)
    print(f"cables measured by the switches: {len(rows)} ports; a burst of {BURST} x "
          f"{PAYLOAD} B at {LINE_BPS / 1e6:g} Mbit/s into a port forwarding at "
          f"{DRAIN_BPS / 1e6:g} Mbit/s, XOFF {XOFF} B:")
    for km in sorted({r["configured_km"] for r in rows}):
        row = next(r for r in rows if r["configured_km"] == km and r.get("km"))
        receiver = Endpoint(node=row["node"], iface=row["port"])
        link = lab.plan.link_at(receiver)
        sender = lab.plan.peer_of(receiver)
        cases = [("measured", for_km(row["km"], LINE_BPS, MTU))]
        if km > 2:
            cases.append(("2 km cable's", for_km(2, LINE_BPS, MTU)))
        for label, headroom in cases:
            r = lossless_burst(lab, sender, Impairment(
                delay_us=link.impairment.delay_us, rate_bps=LINE_BPS, lossless=Lossless(
                    xoff=XOFF, headroom=headroom.bytes, drain_bps=DRAIN_BPS, dscp=ROCE_DSCP)),
                count=BURST, size=PAYLOAD)
            print(f"  {km:>5g} km (measured {row['km']:5.1f}) {label:>12} headroom "
                  f"{headroom.bytes:>6} B: received {r.received}/{r.sent}, dropped "
                  f"{r.dropped}, {r.pauses} pauses, queue peak {r.peak - XOFF} B over XOFF")
    used = sum(r["headroom_bytes"] for r in rows)
    worst = sum(r["worst_case_bytes"] for r in rows)
    longest = max(r["configured_km"] for r in rows)
    print(f"  headroom at the ports' speeds from the measurements: {used / 1e6:.1f} MB; "
          f"every port provisioned for {longest:g} km (labctl headroom's worst case): "
          f"{worst / 1e6:.1f} MB ({worst / used:.2f}x)")


def latency_cliff(lab: Lab) -> None:
    across = lab.plan.links_between_regions()
    hosts = [n.name for n in lab.plan.nodes if n.role is Role.host]
    ends = [end for link in across for end in (link.a, link.b)]
    print(f"all-reduce of {ALLREDUCE_BYTES >> 10} KiB by {len(hosts)} replicas, "
          f"{INTER_REGION_US / 1000:g} ms one way between regions, {ITERATIONS} iterations:")
    with impair.temporarily(lab, ends, Impairment(delay_us=INTER_REGION_US)):
        runs = [measure(lab, hosts, algorithm, size=ALLREDUCE_BYTES, iterations=ITERATIONS,
                        across=across) for algorithm in ("ring", "hierarchical")]
    for m in runs:
        print(f"  {m.algorithm:>12}: {m.seconds * 1e3:6.1f} ms median (physics: >= "
              f"{m.critical_crossings} x {INTER_REGION_US / 1000:g} ms), "
              f"{m.crossing_bytes / 1024:6.0f} KiB across BAG per all-reduce "
              f"({m.crossing_payload / 1024:.0f} KiB payload)")
    ring, hierarchical = runs
    print(f"  hierarchical / ring: time {hierarchical.seconds / ring.seconds:.2f}, "
          f"bytes across BAG {hierarchical.crossing_bytes / ring.crossing_bytes:.2f}")


def reuse(lab: Lab) -> None:
    """Flap the 40 km bundle r2b2-spine1 <-> r2-bag1 ten times in a minute; time until
    r1-bag1 uses the dampened paths again."""
    damping = lab.plan.damping
    assert damping is not None
    bundle = [i.name for i in lab.plan.node("r2-bag1").interfaces
              if i.peer.node == "r2b2-spine1"]
    prefix = f"{lab.plan.node('r2b2-host1').loopback4}/32"
    flap_bundle(lab, "r2-bag1", bundle, times=10, period_s=5.0)
    flapped = time.monotonic()
    listing = lab.frr("r1-bag1").vtysh("show bgp ipv4 unicast dampening dampened-paths")
    if prefix not in listing:
        raise LabError(f"r1-bag1 did not suppress {prefix}: {listing}")
    forecast = re.search(rf"{re.escape(prefix)}\s+\S+\s+(\d\d:\d\d:\d\d)", listing)
    print(f"damping {damping}: {prefix} suppressed at r1-bag1; FRR forecasts reuse in "
          f"{forecast.group(1) if forecast else '?'}")
    wait_until(lambda: prefix not in lab.frr("r1-bag1").vtysh(
        "show bgp ipv4 unicast dampening dampened-paths"),
        flapped + damping.max_suppress * 60 + 120 - time.monotonic(),
        lambda _: LabError(f"{prefix} still suppressed past max-suppress"), every=10)
    print(f"  reused after {(time.monotonic() - flapped) / 60:.1f} min "
          f"(max-suppress {damping.max_suppress} min)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reuse", action="store_true",
                        help="also wait for damped routes to be reused (up to max-suppress)")
    parser.add_argument("--lab", help="measure this deployed bag-mini lab instead of "
                        "deploying one (it is left running)")
    args = parser.parse_args()
    if args.lab:
        lab = Lab.open(args.lab)
    else:
        destroy_lab("benchbag")
        started = time.monotonic()
        lab = deploy(ROOT / "topologies" / "bag-mini.yml", name="benchbag", timeout=240)
        print(f"bag-mini deployed and converged in {time.monotonic() - started:.0f} s")
    try:
        lossless(lab)
        latency_cliff(lab)
        if args.reuse:
            reuse(lab)
    finally:
        if not args.lab:
            lab.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
