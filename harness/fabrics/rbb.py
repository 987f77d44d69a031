"""Meta's regional backbone (RBB) as a topology: SRv6 routers on SAI switches in a ring with
chords, data-center campuses and a public-cloud edge hanging off it, every link its fibre's
length.

Routers bb1..bbN form a ring (`ring_km` a span); chord k joins bb(1+k) to the router across
the ring (`chord_km`). Campus c's edge (role bag, region cC: a BAG lab's BAG switches stand in
the same place, so the two files join into one lab) hangs off the routers spread evenly round
the ring, the cloud edge off the router after campus 1's; each edge has `hosts_per_campus`
hosts behind it, addressed from 10.100.C.0/24 and fd00:100:C::/64 so policies can name them.
With two campuses or more the file carries two TE policies from campus 1's router to campus
2's hosts, IPv6 and IPv4, along the ring one way with the other way as fallback: longer than
the chord BGP prefers, so the policy's path is visible on the wire.

`--join BAG_FILE` writes one lab of both: the BAG file's nodes and links as they are, each of
its regions a campus whose edges are that region's BAG switches (each linked to the campus's
router), and the backbone beside them. Its hosts' addresses are the BAG lab's own (from the
pools), so such a file carries no policies: add them under srv6.policies.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import FabricLabError
from harness.fabrics.base import Cabling, Fabric, param
from harness.topology.loader import load_file, parse_yaml
from harness.topology.schema import Role
from harness.topology.validate import validate

# Between backbone routers, as operators size a core: a 1,500-byte packet from a campus still
# fits once the headend adds its outer IPv6 header and SRH (40 + 8 + 16 per SID bytes). With
# 1,500 here a full-size packet cannot leave the headend and TCP stalls (PMTUD gets no answer).
CORE_MTU = 9100

BFD = {"interval": "100ms", "multiplier": 3}


class RbbParameterError(FabricLabError):
    """RBB generator parameters that cannot be built; names the parameter and the fix."""


@dataclass(frozen=True)
class RbbParams:
    routers: int = param(4, help="backbone routers in the ring", required=True)
    campuses: int = param(2, help="data-center campuses", required=True)
    chords: int = param(1, help="chords across the ring")
    hosts_per_campus: int = param(1, help="hosts behind each campus edge and the cloud edge")
    cloud: int = param(1, help="public-cloud edges (0 or 1)")
    ring_km: float = param(100.0, help="length of a ring span")
    chord_km: float = param(300.0, help="length of a chord")
    campus_km: float = param(10.0, help="campus (and cloud) edge to its router")
    join: str | None = param(None, help="a BAG topology file: one lab of both, its regions the "
                             "campuses and their BAG switches the campus edges")
    name: str | None = param(None, help="lab name (default rbb-<routers>r<campuses>c)")

    @property
    def lab_name(self) -> str:
        return self.name or f"rbb-{self.routers}r{self.campuses}c"


def router(i: int) -> str:
    return f"bb{i + 1}"


def check(p: RbbParams) -> None:
    problems = [f"--{key.replace('_', '-')} {getattr(p, key)}: must be {low}..{high}"
                for key, low, high in (("routers", 3, 64), ("campuses", 1, 32),
                                       ("chords", 0, p.routers // 2),
                                       ("hosts_per_campus", 1, 64), ("cloud", 0, 1))
                if not low <= getattr(p, key) <= high]
    problems += [f"--{key.replace('_', '-')} {getattr(p, key)}: must be 0..40000 km"
                 for key in ("ring_km", "chord_km", "campus_km")
                 if not 0 <= getattr(p, key) <= 40_000]
    if p.campuses > p.routers:
        problems.append(f"--campuses {p.campuses}: at most one campus per router "
                        f"({p.routers})")
    if problems:
        raise RbbParameterError("cannot generate RBB topology:\n  " + "\n  ".join(problems))


def bag_regions(path: str) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """A BAG topology file as written, and its BAG switches by region (checked first)."""
    loaded = load_file(path)
    nodes = validate(loaded)
    data, _ = parse_yaml(Path(path).read_text(), path)
    regions: dict[str, list[str]] = {}
    for name, node in nodes.items():
        if node.role is Role.bag and node.region:
            regions.setdefault(node.region, []).append(name)
    if not regions:
        raise RbbParameterError(f"--join {path}: no BAG switches (role bag with a region) "
                                "to make campus edges of")
    return data, regions


def generate(p: RbbParams) -> dict[str, Any]:
    check(p)
    joined, regions = bag_regions(p.join) if p.join else ({}, {})
    if regions and p.campuses != len(regions):
        raise RbbParameterError(f"--campuses {p.campuses}: the joined BAG lab has "
                                f"{len(regions)} regions, one campus each")
    n = p.routers
    topology_in = joined.get("topology", {})
    nodes: dict[str, dict[str, Any]] = {**topology_in.get("nodes", {}),
                                        **{router(i): {"role": "backbone", "kind": "sai"}
                                           for i in range(n)}}
    cabling = Cabling(topology_in.get("links", []))

    def join(a: str, b: str, km: float, **extra: Any) -> None:
        cabling.join(a, b, **({"distance_km": km} if km else {}), **extra)  # a patch: no length

    for i in range(n):
        join(router(i), router((i + 1) % n), p.ring_km, mtu=CORE_MTU)
    for k in range(p.chords):
        join(router(k), router(k + n // 2), p.chord_km, mtu=CORE_MTU)
    homes = [c * n // p.campuses for c in range(p.campuses)]
    for home, bags in zip(homes, regions.values(), strict=False):
        for bag in bags:
            join(bag, router(home), p.campus_km)
    edges = [] if regions else [(f"c{c + 1}", f"campus{c + 1}", router(home))
                                for c, home in enumerate(homes)]
    if p.cloud:
        edges.append(("cloud", "cloud", router(homes[0] + 1)))
    for number, (region, edge, home) in enumerate(edges, 1):
        nodes[f"{edge}-edge"] = {"role": "bag", "region": region}
        join(f"{edge}-edge", home, p.campus_km)
        for h in range(1, p.hosts_per_campus + 1):
            host = f"{edge}-host{h}"
            nodes[host] = {"role": "host", "region": region, "loopback4": f"10.100.{number}.{h}",
                           "loopback6": f"fd00:100:{number}::{h}"}
            join(host, f"{edge}-edge", 0)
    return {"name": p.lab_name, "bgp": joined.get("bgp", {"bfd": dict(BFD)}),
            "srv6": {"policies": [] if regions else policies(p, homes)},
            "topology": {"defaults": {"kind": "frr"}, "nodes": nodes, "links": cabling.links}}


def policies(p: RbbParams, homes: list[int]) -> list[dict[str, Any]]:
    """Campus 1's router to campus 2's hosts the long way round (and back the other way)."""
    if p.campuses < 2:
        return []
    start, end, n = homes[0], homes[1], p.routers
    forward = [router(i % n) for i in range(start + 1, end + 1)]
    backward = [router(i % n) for i in range(start - 1, end - n - 1, -1)]
    if len(forward) < len(backward):
        forward, backward = backward, forward
    return [{"name": f"{family}-c1-to-c2", "headend": router(start),
             "destination": destination, "path": list(forward), "fallback": list(backward)}
            for family, destination in (("v6", "fd00:100:2::/64"), ("v4", "10.100.2.0/24"))]


def describe(p: RbbParams) -> str:
    joined = f", joined to {Path(p.join).name}'s regions as campuses" if p.join else ""
    return (f"RBB: {p.routers} SRv6 routers in a ring with {p.chords} chord(s), "
            f"{p.campuses} campuses{' and a cloud edge' if p.cloud else ''}{joined}; "
            f"{p.ring_km:g} km spans, {p.chord_km:g} km chords.")


FABRIC = Fabric("rbb", "regional backbone: SRv6 routers in a ring with chords joining "
                "campuses and a cloud edge, with TE policies", RbbParams, generate, describe)
