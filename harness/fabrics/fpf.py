"""Meta's Flattened Planar Fabric (FPF) as a topology: N independent planes, each a 2-tier Clos.

Every host has one NIC per plane (eth1 is plane 0, eth2 plane 1, ...) cabled to a leaf of that
plane; a plane's leaves connect to all of that plane's spines and to nothing else, so planes
share no links and a failure inside one plane cannot touch another. Hosts are spread over the
leaves in blocks (host k sits on the same leaf index in every plane), which is how FPF racks
are cabled. BFD runs on every session so a silent plane failure is found in milliseconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from harness.core.errors import FabricLabError
from harness.fabrics.base import Fabric, param, render
from harness.topology.augment import augment
from harness.topology.loader import load_text
from harness.topology.plan import LabPlan
from harness.topology.schema import Kind
from harness.topology.units import parse_duration_us

NIC_SPEED = "100G"  # nominal per-plane NIC speed (emulated links are not rate limited)
DEFAULT_LEAF_RADIX = 64
SWITCH_KINDS = (Kind.sai.value, Kind.frr.value)
BFD_ENGINES = ("offload", "bfdd")  # where sessions run: each node's fl-bfd, or bfdd itself
BFD = {"interval": "100ms", "multiplier": 3}  # a silent plane is found within 300 ms


class FpfParameterError(FabricLabError):
    """FPF generator parameters that cannot be built; names the parameter and the fix."""


@dataclass(frozen=True)
class FpfParams:
    planes: int = param(8, help="independent planes, one host NIC each")
    leaves_per_plane: int = param(2, help="leaves in each plane", required=True)
    spines_per_plane: int = param(1, help="spines in each plane", required=True)
    hosts: int = param(4, help="GPU hosts, spread over the leaves in blocks", required=True)
    leaf_radix: int = param(DEFAULT_LEAF_RADIX, help=f"ports per leaf (default "
                            f"{DEFAULT_LEAF_RADIX})")
    name: str | None = param(None, help="lab name (default fpf-<hosts>h)")
    # Echo on host links also tests the leaf's forwarding path and finds a dead plane sooner;
    # off by default: on 2 cores it storms (sessions flap) at 8 hosts per leaf.
    host_echo: str | None = param(None, help="BFD echo on host links, e.g. 50ms (default: "
                                  "control packets only)")
    switch_kind: str = param(Kind.sai.value, choices=SWITCH_KINDS, help="sai: FRR over the "
                             "SAI agent, as FPF switches run (default); frr: plain FRR routers")
    bfd: str = param(BFD_ENGINES[0], choices=BFD_ENGINES, help="offload: each node's BFD "
                     "sessions run in its fl-bfd, one wake-up per tick (default); bfdd: in "
                     "bfdd's own packet loop")

    @property
    def hosts_per_leaf(self) -> int:
        return math.ceil(self.hosts / self.leaves_per_plane)

    @property
    def lab_name(self) -> str:
        return self.name or f"fpf-{self.hosts}h"


def leaf_name(plane: int, leaf: int) -> str:
    return f"p{plane}-leaf{leaf + 1}"


def spine_name(plane: int, spine: int) -> str:
    return f"p{plane}-spine{spine + 1}"


def host_name(host: int) -> str:
    return f"host{host + 1}"


def plane_nic(plane: int) -> str:
    """The host NIC of a plane: eth1 is plane 0."""
    return f"eth{plane + 1}"


def check(p: FpfParams) -> None:
    """Raise one error listing every parameter that cannot be built, each with its fix."""
    problems = []
    for key, low, high in (("planes", 1, 64), ("leaves_per_plane", 1, 256),
                           ("spines_per_plane", 1, 64), ("hosts", 2, 4096),
                           ("leaf_radix", 2, 1024)):
        value = getattr(p, key)
        if not low <= value <= high:
            problems.append(f"--{key.replace('_', '-')} {value}: must be {low}..{high}")
    if not problems:
        ports = p.hosts_per_leaf + p.spines_per_plane
        if ports > p.leaf_radix:
            most = (p.leaf_radix - p.spines_per_plane) * p.leaves_per_plane
            problems.append(
                f"--hosts {p.hosts}: {p.hosts_per_leaf} hosts per leaf + {p.spines_per_plane} "
                f"uplinks need {ports} ports but --leaf-radix is {p.leaf_radix}; use at most "
                f"{max(most, 0)} hosts, more --leaves-per-plane, or a larger --leaf-radix")
        if p.hosts < p.leaves_per_plane:
            problems.append(f"--leaves-per-plane {p.leaves_per_plane}: more leaves than hosts "
                            f"({p.hosts}) leaves some empty; use at most {p.hosts}")
    if p.switch_kind not in SWITCH_KINDS:
        problems.append(f"--switch-kind {p.switch_kind}: use {' or '.join(SWITCH_KINDS)}")
    if p.host_echo is not None:
        try:
            parse_duration_us(p.host_echo)
        except ValueError as exc:
            problems.append(f"--host-echo {p.host_echo}: {exc}")
    if problems:
        raise FpfParameterError("cannot generate FPF topology:\n  " + "\n  ".join(problems))


def generate(p: FpfParams) -> dict[str, Any]:
    """The topology file as data (same shape `labctl deploy` reads)."""
    check(p)
    nodes: dict[str, dict[str, Any]] = {}
    links: list[dict[str, Any]] = []
    for plane in range(p.planes):
        for s in range(p.spines_per_plane):
            nodes[spine_name(plane, s)] = {"role": "spine", "plane": plane,
                                           "kind": p.switch_kind}
        for leaf in range(p.leaves_per_plane):
            nodes[leaf_name(plane, leaf)] = {"role": "leaf", "plane": plane,
                                             "kind": p.switch_kind}
            for s in range(p.spines_per_plane):
                links.append({"endpoints": [f"{leaf_name(plane, leaf)}:eth{s + 1}",
                                            f"{spine_name(plane, s)}:eth{leaf + 1}"]})
    for h in range(p.hosts):
        nodes[host_name(h)] = {"role": "host", "labels": {"nic-speed": NIC_SPEED}}
        leaf, port = divmod(h, p.hosts_per_leaf)
        for plane in range(p.planes):
            links.append({"endpoints": [f"{host_name(h)}:{plane_nic(plane)}",
                                        f"{leaf_name(plane, leaf)}:"
                                        f"eth{p.spines_per_plane + port + 1}"]})
    bfd = {**BFD, **({"host_echo": p.host_echo} if p.host_echo else {}),
           **({"offload": False} if p.bfd == "bfdd" else {})}
    return {"name": p.lab_name, "bgp": {"bfd": bfd},
            "topology": {"defaults": {"kind": "frr"}, "nodes": nodes, "links": links}}


def describe(p: FpfParams) -> str:
    return (f"FPF: {p.planes} planes x ({p.leaves_per_plane} leaves + {p.spines_per_plane} "
            f"spines), {p.hosts} hosts with one {NIC_SPEED} NIC per plane.")


FABRIC = Fabric("fpf", "Flattened Planar Fabric: independent planes, one host NIC per plane",
                FpfParams, generate, describe)


def plan(p: FpfParams) -> LabPlan:
    """Generate and augment in one step (tests and benches deploy variants without a file)."""
    return augment(load_text(render(FABRIC, p), f"<labctl gen fpf {p.lab_name}>"))
