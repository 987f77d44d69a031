"""Nodes the user configures, containerlab's way: no role, so nothing is planned for them.

An FRR image (or containerlab's kind frr) becomes an FRR router running the user's own config
with the user's daemons; anything else is a plain node running its exec and cmd.
"""

from __future__ import annotations

from pathlib import Path

from harness.core.errors import TopologyError
from harness.topology.binds import bound_file
from harness.topology.frr_image import (
    CONFIG_FILE,
    DAEMONS,
    DAEMONS_FILE,
    FRR_STARTS,
    daemons_for_config,
    daemons_from_file,
    is_frr_image,
)
from harness.topology.loader import LoadedTopology
from harness.topology.plan import NodePlan
from harness.topology.schema import Kind, NodeFields


def user_node(loaded: LoadedTopology, name: str, spec: NodeFields, node: NodePlan) -> NodePlan:
    """A node configured by the user: an FRR image or kind frr runs FRR with the user's
    config as it is; anything else runs only its exec and cmd."""
    path = ("topology", "nodes", name)
    if spec.kind is Kind.frr:
        config = Path(loaded.source.file).parent / spec.startup_config  # type: ignore[operator]
        daemons = (["zebra", *(d for d in spec.extras.frr.daemons if d != "zebra")]
                   if spec.extras and spec.extras.frr and spec.extras.frr.daemons
                   else daemons_for_config(config.read_text()))
        unknown = [d for d in daemons if d not in DAEMONS]
        if unknown:
            raise TopologyError([loaded.source.problem(
                (*path, "extras"), f"unknown FRR daemon(s) {', '.join(unknown)}",
                f"use some of: {', '.join(DAEMONS)}")])
        return node.model_copy(update={"frr_config": str(config.resolve()), "daemons": daemons,
                                       "exec": without_frr_starts(node.exec)})
    if spec.kind is not Kind.linux or not is_frr_image(spec.image):
        return node
    config = bound_file(node.binds, CONFIG_FILE)
    daemons_file = bound_file(node.binds, DAEMONS_FILE)
    try:
        daemons = (daemons_from_file(daemons_file) if daemons_file else
                   daemons_for_config(config.read_text() if config else ""))
    except ValueError as exc:
        raise TopologyError([loaded.source.problem((*path, "binds"), str(exc),
                                                   "switch that daemon off (=no)")]) from None
    return node.model_copy(update={"kind": Kind.frr, "daemons": daemons,
                                   "frr_config": str(config) if config else None,
                                   "exec": without_frr_starts(node.exec)})


def without_frr_starts(commands: list[str]) -> list[str]:
    return [c for c in commands if not FRR_STARTS.search(c)]
