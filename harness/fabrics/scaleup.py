"""A scale-up pod as a topology: accelerators joined through a few switches, one NIC port per
switch, as Meta's Tahan pod (16 accelerators over 4 switches) and the next generation (72 over
8) are built.

It is FPF with one switch per plane: every switch is a plane of its own (`plane: N`), every
accelerator has a port on every switch (ethN+1 to switch N+1), so each pair of accelerators has
one equal path through each switch and the pod is non-blocking by construction; routing is
eBGP with IPv6 between accelerators (each switch its own ASN, `role: scaleup`), and the
accelerators spray every packet over the switches that work, as FPF hosts do over planes.
Every switch port carries one lossless RDMA class honouring each shipped vendor's RoCEv2
marking (harness/topology/qos.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.core.errors import FabricLabError
from harness.fabrics.base import Fabric, param, render
from harness.fabrics.fpf import BFD
from harness.topology.augment import augment
from harness.topology.loader import load_text
from harness.topology.plan import LabPlan
from harness.topology.platforms import PLATFORMS, Platform
from harness.topology.qos import shipped
from harness.topology.schema import Role

AUTO = "auto"
POD_PLATFORMS = ("tahan", "scaleup-blade")


class ScaleupParameterError(FabricLabError):
    """Pod parameters that cannot be built; names the parameter and the fix."""


@dataclass(frozen=True)
class ScaleupParams:
    accelerators: int = param(16, help="accelerators in the pod", required=True)
    switches: int = param(4, help="scale-up switches, one port of every accelerator each",
                          required=True)
    platform: str = param(AUTO, choices=(AUTO, *POD_PLATFORMS),
                          help="the switches' platform (auto: the first of "
                          f"{', '.join(POD_PLATFORMS)} with a port for every accelerator)")
    name: str | None = param(None, help="lab name (default scaleup-<accelerators>)")

    @property
    def lab_name(self) -> str:
        return self.name or f"scaleup-{self.accelerators}"

    def chosen(self) -> Platform:
        names = POD_PLATFORMS if self.platform == AUTO else (self.platform,)
        for name in names:
            platform = PLATFORMS[name]
            if self.accelerators <= facing(platform):
                return platform
        biggest = max(facing(PLATFORMS[n]) for n in POD_PLATFORMS)
        raise ScaleupParameterError(
            f"--accelerators {self.accelerators}: a {names[-1]} switch has "
            f"{facing(PLATFORMS[names[-1]])} ports toward accelerators; use at most that"
            + (f", or --platform {AUTO} (up to {biggest})" if self.platform != AUTO else ""))


def facing(platform: Platform) -> int:
    """Ports a switch of this platform may give to accelerators."""
    return platform.accelerator_ports or platform.ports or 0


def switch_name(s: int) -> str:
    return f"sw{s + 1}"


def accelerator_name(a: int) -> str:
    return f"acc{a + 1}"


def generate(p: ScaleupParams) -> dict[str, Any]:
    problems = [f"--{key} {getattr(p, key)}: must be {low}..{high}" for key, low, high in
                (("accelerators", 2, 1024), ("switches", 1, 64))
                if not low <= getattr(p, key) <= high]
    if problems:
        raise ScaleupParameterError("cannot generate a scale-up pod:\n  " + "\n  ".join(problems))
    platform = p.chosen()
    nodes: dict[str, dict[str, Any]] = {
        switch_name(s): {"role": Role.scaleup.value, "kind": "sai", "plane": s,
                         "platform": platform.name} for s in range(p.switches)}
    links = []
    for a in range(p.accelerators):
        nodes[accelerator_name(a)] = {"role": Role.host.value}
        links += [{"endpoints": [f"{accelerator_name(a)}:eth{s + 1}",
                                 f"{switch_name(s)}:eth{a + 1}"]} for s in range(p.switches)]
    return {"name": p.lab_name, "bgp": {"bfd": dict(BFD)}, "qos": {"profiles": shipped()},
            "topology": {"defaults": {"kind": "frr"}, "nodes": nodes, "links": links}}


def describe(p: ScaleupParams) -> str:
    platform = p.chosen()
    return (f"Scale-up pod: {p.accelerators} accelerators, a port on each of {p.switches} "
            f"{platform.name} switches ({platform.hardware()}).")


def nonblocking(plan: LabPlan) -> list[str]:
    """Why the pod is not non-blocking (empty: it is): every accelerator must reach every
    switch over the same number of equal ports, and no switch may have more accelerators
    than its platform gives ports to."""
    switches = [n for n in plan.nodes if n.role is Role.scaleup]
    accelerators = [n for n in plan.nodes if n.role is Role.host]
    problems = []
    for switch in switches:
        ports = [i for i in switch.interfaces if plan.node(i.peer.node).role is Role.host]
        per = {a.name: sum(i.peer.node == a.name for i in ports) for a in accelerators}
        speeds = {i.bandwidth_bps for i in ports}
        if len(set(per.values())) != 1 or 0 in per.values():
            uneven = {k: v for k, v in per.items() if v != max(per.values())}
            problems.append(f"{switch.name}: uneven ports toward accelerators: {uneven}")
        if len(speeds) > 1:
            problems.append(f"{switch.name}: ports toward accelerators at different speeds")
        platform = PLATFORMS.get(switch.platform or "")
        if platform and len(ports) > facing(platform):
            problems.append(f"{switch.name}: {len(ports)} accelerator ports on a "
                            f"{platform.name}, which gives {facing(platform)}")
    return problems


FABRIC = Fabric("scaleup", "scale-up pod: accelerators over a few switches, one port each",
                ScaleupParams, generate, describe)


def plan(p: ScaleupParams) -> LabPlan:
    return augment(load_text(render(FABRIC, p), f"<labctl gen scaleup {p.lab_name}>"))
