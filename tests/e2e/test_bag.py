"""bag-mini with real FRR on SAI switches: two regions of two buildings joined by BAG switches
over 2, 40 and 400 km bundles. Every host reaches every other across buildings and regions,
and a ping across regions takes at least the light's time in the fibre of its path."""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterator

import pytest

from harness.lab import Lab
from harness.status import lab_status
from harness.testing.plugin import RUNTIME
from harness.topology.augment import augment
from harness.topology.fibre import one_way_delay_us
from harness.topology.loader import load_file
from harness.topology.schema import Role
from tests.conftest import TOPOLOGIES

pytestmark = pytest.mark.e2e
PINGS = 20


@pytest.fixture(scope="module")
def bag() -> Iterator[Lab]:
    lab = Lab(augment(load_file(TOPOLOGIES / "bag-mini.yml"), "e2ebag"), RUNTIME)
    lab.deploy(timeout=240)
    yield lab
    lab.destroy()


def rtts_ms(lab: Lab, src: str, dst: str) -> list[float]:
    out = lab.node(src).cmd("ping", "-n", "-c", str(PINGS), "-i", "0.05", "-W", "2",
                            lab.plan.node(dst).loopback4 or "", timeout=60)
    return [float(t) for t in re.findall(r"time=([0-9.]+) ms", out.stdout)]


def test_every_host_reaches_every_host_across_buildings_and_regions(bag: Lab) -> None:
    hosts = [n.name for n in bag.plan.nodes if n.role is Role.host]
    for src in hosts:
        for dst in hosts:
            if src != dst and src < dst:
                out = bag.node(src).cmd("ping", "-n", "-c", "1", "-W", "3",
                                        bag.plan.node(dst).loopback4 or "")
                assert out.returncode == 0, f"{src} -> {dst}: {out.stdout[-300:]}"


def test_a_ping_across_regions_takes_the_fibres_time_at_least(bag: Lab) -> None:
    """r1b1-host1 -> r2b2-host1: 2 km to r1's BAG, 400 km to r2's, 40 km down to building
    r2b2, and back: the fibre alone takes 2 x 442 km of light; the engines that carry the
    delay add their lateness and the hops their forwarding, well under a millisecond here."""
    fibre_ms = 2 * one_way_delay_us(2 + 400 + 40) / 1000
    rtts = rtts_ms(bag, "r1b1-host1", "r2b2-host1")
    assert len(rtts) >= PINGS - 1, rtts  # one may go while a path settles
    assert min(rtts) >= fibre_ms, (fibre_ms, rtts)
    assert statistics.median(rtts) <= fibre_ms + 1.0, (fibre_ms, rtts)
    local = rtts_ms(bag, "r1b1-host1", "r1b1-host2")  # one building: no long haul
    assert statistics.median(local) < fibre_ms / 4, local


def test_inspect_places_every_node_and_bag_sessions_are_ebgp_across_regions(bag: Lab) -> None:
    rows = {r["node"]: r for r in lab_status(bag)}
    assert rows["r1-bag1"]["region"] == "r1" and "building" not in rows["r1-bag1"]
    assert (rows["r2b2-leaf1"]["region"], rows["r2b2-leaf1"]["building"]) == ("r2", "r2b2")
    assert all(r["state"] == "running" for r in rows.values()), [
        (n, r["state"], r.get("sai")) for n, r in rows.items() if r["state"] != "running"]
    across = [s for s in bag.plan.sessions if {s.node[:2], s.peer[:2]} == {"r1", "r2"}]
    assert across and all(s.local_asn != s.peer_asn for s in across)
    assert all(set(bag.frr(n).bgp_peer_states().values()) == {"Established"}
               for n in ("r1-bag1", "r2-bag2"))
