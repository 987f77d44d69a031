"""Whether this host can run a lab, and how: what `labctl doctor` concludes from the kernel
features it probed (harness/linux/features.py) and the tools it found, for each shipped topology.

Pure: a plan and what the host has in, a verdict out. A lab is ready as it is, ready through
a fallback (said, as the deploy will take it), ready with an opt-in (named: nothing of the
host changes unasked), or not ready (with what is missing).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from harness.linux.ksm import MIB_PER_FRR_NODE
from harness.nodes.kind import KINDS
from harness.spray.nic import spraying_hosts
from harness.topology.plan import LabPlan


@dataclass
class Verdict:
    lab: str
    missing: list[str] = field(default_factory=list)  # not ready while any is
    fallbacks: list[str] = field(default_factory=list)  # paths taken instead
    opt_ins: list[str] = field(default_factory=list)  # deploy flags the lab needs here

    @property
    def ready(self) -> bool:
        return not self.missing

    def __str__(self) -> str:
        if self.missing:
            return "not ready: " + "; ".join(self.missing)
        how = [*(f"with {o}" for o in self.opt_ins), *self.fallbacks]
        return "ready" + (f" ({'; '.join(how)})" if how else "")


@dataclass(frozen=True)
class Host:
    """What the host has: kernel features by name, tools by name, free memory, whether big
    labs can share memory, and the neighbour tables' verdict on a plan."""

    feature: Callable[[str], bool]
    tool: Callable[[str], bool]
    available_mib: float
    can_share_memory: bool
    neighbour_problem: Callable[[LabPlan], str | None]


def verdict(name: str, plan: LabPlan, host: Host) -> Verdict:
    v = Verdict(name)
    frr_nodes = sum(n.runs_frr for n in plan.nodes)
    if frr_nodes and not host.tool("frr"):
        v.missing.append("FRR (apt-get install frr, or `make setup`)")
    needs = {feature: why for n in plan.nodes for feature, why in KINDS[n.kind].needs.items()}
    v.missing += [why for feature, why in needs.items() if not host.feature(feature)]
    impaired = any(not link.impairment.is_clean for link in plan.links)
    if impaired and not host.feature("netem"):
        if host.feature("tc_redirect"):
            v.fallbacks.append("impaired links through the userspace engine: no sch_netem")
        else:
            v.missing.append("sch_netem or tc redirect, to impair its links")
    if plan.qos and plan.qos.buffer and not host.feature("cls_bpf_redirect"):
        v.missing.append("tc's classic BPF filter and mirred, which the port engines of a "
                         "qos: buffer take frames through")
    if spraying_hosts(plan) and not host.tool("nft"):
        v.missing.append("nftables, which the hosts' NICs spray with")
    if host.neighbour_problem(plan):
        v.opt_ins.append("--raise-neighbour-limits (its ARP/ND entries exceed the host's "
                         "limits)")
    need = frr_nodes * MIB_PER_FRR_NODE
    if need > host.available_mib:
        if host.can_share_memory:
            v.opt_ins.append(f"--share-memory on (~{need / 1024:.1f} GiB unshared, "
                             f"{host.available_mib / 1024:.1f} available)")
        else:
            v.missing.append(f"memory: ~{need / 1024:.1f} GiB for {frr_nodes} FRR nodes, "
                             f"{host.available_mib / 1024:.1f} available, and no KSM to share")
    return v
