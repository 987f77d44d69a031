"""The `host` kind: a GPU host whose NICs reach more than one plane. It runs FRR (eBGP to its
leaves) and the spraying NIC (harness/spray), which sends every packet over a healthy plane."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.nodes.frr import FrrKind, bfd_news, patience, worse_state
from harness.spray.nic import spray_status, start_sprayer, wait_sprayer
from harness.topology.plan import NodePlan

if TYPE_CHECKING:
    from harness.runtime.context import LabContext


SPRAYER_START_S = 20.0  # Python, a route dump and the first apply, on a quiet host


class HostKind(FrrKind):
    name = "host"

    def converged(self, lab: LabContext, node: NodePlan) -> None:
        """The sprayer starts once the routes are in: started with FRR, each host's agent
        re-sprayed at every route a converging lab added, N hosts each reacting to N hosts'
        routes (at 224 nodes a quarter of the start stage's CPU). A restart after a crash
        starts it at once: the routes are there."""
        start_sprayer(lab, node, bfd_news(lab, node.name))
        wait_sprayer(lab, node, SPRAYER_START_S * patience(len(lab.plan.nodes)))

    def restart(self, lab: LabContext, node: NodePlan) -> None:
        super().restart(lab, node)
        start_sprayer(lab, node, bfd_news(lab, node.name))

    def status(self, lab: LabContext, node: NodePlan) -> dict[str, Any]:
        """Adds columns `nics` and `planes`."""
        status = super().status(lab, node)
        spray = spray_status(lab, node)
        return {**status, **spray, "state": worse_state(status["state"], spray["state"])}
