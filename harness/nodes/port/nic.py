"""Host NICs that honour PAUSE: an fl-port engine (nic mode) on each host port cabled to a
switch whose lab declares a `qos:` buffer.

A real NIC serialises at its link speed and stops a paused class; a veth does neither. So
each such host port drains at its link's `bandwidth` through eight queues by the lab's DSCP
map, and a PAUSE from the switch stops that class for its quanta. The engine is a node
helper (destroy ends it) with its control socket in the lab's directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from harness.core.errors import LabError
from harness.nodes.kind import KINDS
from harness.nodes.port import redirect
from harness.nodes.port.engine import ENGINE, PortEngine, class_maps
from harness.topology.plan import Endpoint, LabPlan

if TYPE_CHECKING:
    from harness.runtime.context import LabContext

STATE_DIR = "ports"
DEFAULT_NIC_BPS = 100_000_000_000  # a link without a `bandwidth`: a 100G NIC


def nic_ends(plan: LabPlan) -> list[Endpoint]:
    """Ends of links to a node whose ports are engines (a SAI switch), when the lab's
    switches have a buffer."""
    if plan.qos is None or plan.qos.buffer is None:
        return []
    engine = {n.name: KINDS[n.kind].port_engine for n in plan.nodes}
    return [end for link in plan.links for end, far in ((link.a, link.b), (link.b, link.a))
            if engine[far.node] and not engine[end.node]]


def engine_of(lab_dir: Path, end: Endpoint) -> PortEngine:
    return PortEngine(lab_dir / STATE_DIR, f"{end.node}.{end.iface}", f"NIC engine of {end}")


def start(lab: LabContext, end: Endpoint) -> None:
    plan, node = lab.plan, lab.node(end.node)
    assert plan.qos is not None
    iface = next(i for i in plan.node(end.node).interfaces if i.name == end.iface)
    with node.netlink() as ip:
        index = ip.link_lookup(ifname=end.iface)
    if not index:
        raise LabError(f"{end}: no such interface in the node")
    engine = engine_of(lab.dir, end)
    engine.control.parent.mkdir(parents=True, exist_ok=True)
    engine.control.unlink(missing_ok=True)
    lab.runtime.spawn(end.node, [lab.runtime.program(ENGINE), "run", "nic",
                                 str(engine.control)], engine.log, f"NIC engine {end}")
    engine.wait_ready()
    tap = redirect.nic_tap(index[0])
    engine.command(f"port 0 name={end.iface} tap={tap} "
                   f"speed_bps={iface.bandwidth_bps or DEFAULT_NIC_BPS} "
                   f"{class_maps(plan.qos.dscp_to_tc, plan.qos.tc_to_queue)}")
    for command in redirect.nic_redirects(end.iface, tap):
        node.cmd("tc", *command, check=True)
