"""Render a SAI switch's configuration document from the plan (pure: plan in, document out).

The document is what the switch agent's configuration channel applies (harness/agent/config.py
says its form): everything the switch is told that FPM does not carry. Today the plan knows
port speeds (a link's `bandwidth`); the fabrics add what they need here (BAG its buffer
profiles, RBB its SIDs and policies, the QoS work its maps), one function each.
"""

from __future__ import annotations

from typing import Any

from harness.topology.plan import NodePlan

MBIT = 1_000_000


def sai_config(node: NodePlan) -> dict[str, dict[str, Any]]:
    """Each port whose link sets a `bandwidth`, at that speed (SAI counts Mb/s)."""
    return {f"PORT|{i.name}": {"SAI_PORT_ATTR_SPEED": i.bandwidth_bps // MBIT}
            for i in node.interfaces if i.bandwidth_bps}
