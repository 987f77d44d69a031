"""Meta's backend aggregation (BAG) as a topology: building fabrics joined across a region by
a super-spine layer, and regions joined to each other, over links tens to hundreds of km long.

Each region has `buildings_per_region` building fabrics and `bags_per_region` BAG switches.
A building's fabric is DSF-like (2-tier: leaves under spines) or NSF-like (3-tier: leaves,
spines, super-spines); its top tier connects to every BAG switch of its region with a bundle
of `bundle` parallel links, each its own eBGP session, so a failed member takes only its
share of the path's capacity. The first building of a region stands on the BAG's campus
(`campus_km`), the others a sub-region away (`subregion_km`); every BAG pair of two regions is
joined by a bundle `region_km` long. Every node carries its `region` (and `building`), which
scopes the shared ASNs (harness/topology/augment.py): a building's spines share one, not
with another building's, and a region's BAG switches share one.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations, pairwise
from typing import Any

from harness.core.errors import FabricLabError
from harness.fabrics.base import Cabling, Fabric, param
from harness.topology.schema import Damping, Kind

FABRICS = ("dsf", "nsf")  # DSF-like 2-tier, NSF-like 3-tier building fabrics
SWITCH_KINDS = (Kind.sai.value, Kind.frr.value)
BFD = {"interval": "100ms", "multiplier": 3}


class BagParameterError(FabricLabError):
    """BAG generator parameters that cannot be built; names the parameter and the fix."""


@dataclass(frozen=True)
class BagParams:
    regions: int = param(2, help="regions, each with its own BAG switches", required=True)
    buildings_per_region: int = param(2, help="building fabrics in each region",
                                      required=True)
    fabric: str = param("dsf", choices=FABRICS, help="dsf: 2-tier building fabrics (leaves, "
                        "spines; default); nsf: 3-tier (leaves, spines, super-spines)")
    leaves_per_building: int = param(2, help="leaves in each building")
    spines_per_building: int = param(1, help="spines in each building (and super-spines, "
                                     "for nsf)")
    hosts_per_leaf: int = param(1, help="GPU hosts under each leaf")
    bags_per_region: int = param(2, help="BAG switches in each region")
    bundle: int = param(2, help="parallel links in each building-BAG and BAG-BAG bundle")
    campus_km: float = param(2.0, help="building to BAG on the BAG's campus (the first "
                             "building of a region)")
    subregion_km: float = param(40.0, help="building to BAG elsewhere in the region")
    region_km: float = param(400.0, help="BAG to BAG between regions")
    switch_kind: str = param(Kind.sai.value, choices=SWITCH_KINDS, help="sai: FRR over the "
                             "SAI agent (default); frr: plain FRR routers")
    name: str | None = param(None, help="lab name (default bag-<regions>r<buildings>b)")

    @property
    def lab_name(self) -> str:
        return self.name or f"bag-{self.regions}r{self.buildings_per_region}b"


def region_name(r: int) -> str:
    return f"r{r + 1}"


def building_name(r: int, b: int) -> str:
    return f"{region_name(r)}b{b + 1}"


def bag_name(r: int, i: int) -> str:
    return f"{region_name(r)}-bag{i + 1}"


def check(p: BagParams) -> None:
    """Raise one error listing every parameter that cannot be built, each with its fix."""
    problems = [f"--{key.replace('_', '-')} {getattr(p, key)}: must be {low}..{high}"
                for key, low, high in (("regions", 1, 8), ("buildings_per_region", 1, 16),
                                       ("leaves_per_building", 1, 64),
                                       ("spines_per_building", 1, 16), ("hosts_per_leaf", 0, 64),
                                       ("bags_per_region", 1, 16), ("bundle", 1, 16))
                if not low <= getattr(p, key) <= high]
    problems += [f"--{key.replace('_', '-')} {getattr(p, key)}: must be 0..40000 km"
                 for key in ("campus_km", "subregion_km", "region_km")
                 if not 0 <= getattr(p, key) <= 40_000]
    if p.fabric not in FABRICS:
        problems.append(f"--fabric {p.fabric}: use {' or '.join(FABRICS)}")
    if p.switch_kind not in SWITCH_KINDS:
        problems.append(f"--switch-kind {p.switch_kind}: use {' or '.join(SWITCH_KINDS)}")
    if problems:
        raise BagParameterError("cannot generate BAG topology:\n  " + "\n  ".join(problems))


def generate(p: BagParams) -> dict[str, Any]:
    """The topology file as data (same shape `labctl deploy` reads)."""
    check(p)
    nodes: dict[str, dict[str, Any]] = {}
    cabling = Cabling()
    tiers = ("leaf", "spine", "superspine") if p.fabric == "nsf" else ("leaf", "spine")
    for r in range(p.regions):
        region = region_name(r)
        bags = [bag_name(r, i) for i in range(p.bags_per_region)]
        for bag in bags:
            nodes[bag] = {"role": "bag", "kind": p.switch_kind, "region": region}
        for b in range(p.buildings_per_region):
            building = building_name(r, b)
            placed = {"region": region, "building": building}
            layers = [[f"{building}-{tier}{i + 1}" for i in range(
                p.leaves_per_building if tier == "leaf" else p.spines_per_building)]
                for tier in tiers]
            for tier, layer in zip(tiers, layers, strict=True):
                for node in layer:
                    nodes[node] = {"role": tier, "kind": p.switch_kind, **placed}
            for lower, upper in pairwise(layers):
                for below in lower:
                    for above in upper:
                        cabling.join(below, above)
            for leaf_index, leaf in enumerate(layers[0]):
                for h in range(p.hosts_per_leaf):
                    host = f"{building}-host{leaf_index * p.hosts_per_leaf + h + 1}"
                    nodes[host] = {"role": "host", **placed}
                    cabling.join(host, leaf)
            km = p.campus_km if b == 0 else p.subregion_km
            for top in layers[-1]:
                for bag in bags:
                    for _ in range(p.bundle):
                        cabling.join(top, bag, distance_km=km)
    for r1, r2 in combinations(range(p.regions), 2):
        for i in range(p.bags_per_region):
            for j in range(p.bags_per_region):
                for _ in range(p.bundle):
                    cabling.join(bag_name(r1, i), bag_name(r2, j), distance_km=p.region_km)
    return {"name": p.lab_name, "bgp": {"bfd": dict(BFD), "damping": Damping().model_dump()},
            "topology": {"defaults": {"kind": "frr"}, "nodes": nodes, "links": cabling.links}}


def describe(p: BagParams) -> str:
    tiers = "3-tier NSF-like" if p.fabric == "nsf" else "2-tier DSF-like"
    return (f"BAG: {p.regions} regions x {p.buildings_per_region} {tiers} buildings, "
            f"{p.bags_per_region} BAG switches a region, bundles of {p.bundle}; "
            f"{p.campus_km:g} / {p.subregion_km:g} / {p.region_km:g} km.")


FABRIC = Fabric("bag", "backend aggregation: building fabrics joined by BAG switches across "
                "regions, over long-haul bundles", BagParams, generate, describe)
