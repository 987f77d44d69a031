"""What `labctl inspect` reports per node: what every node has, plus its kind's own columns."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from harness.nodes.kind import kind_of
from harness.runtime.context import LabContext


def node_status(lab: LabContext, name: str) -> dict[str, Any]:
    node, kind = lab.plan.node(name), kind_of(lab, name)
    return {"node": name, "role": node.role.value if node.role else None, "kind": kind.name,
            "plane": node.plane,
            "asn": node.asn, "loopback4": node.loopback4, "loopback6": node.loopback6,
            **({"region": node.region} if node.region else {}),
            **({"building": node.building} if node.building else {}),
            **kind.status(lab, node)}


def lab_status(lab: LabContext) -> list[dict[str, Any]]:
    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(lambda n: node_status(lab, n), lab.node_names))
