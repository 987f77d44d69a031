"""Render a SAI switch's configuration documents from the plan (pure: plan in, documents out).

The SAI document is what the switch agent's configuration channel applies
(harness/nodes/switch/agent/config.py says its form): everything the switch is told that FPM does
not carry. The plan knows port speeds (a link's `bandwidth`) and, on an SRv6 router, its SIDs and
the SID lists of the policies it heads; the fabrics add what they need here, one function each. The
TE document says which route each policy steers and which paths it probes
(harness/nodes/switch/agent/te.py).
"""

from __future__ import annotations

from typing import Any

from harness.nodes.switch.sai.headroom import EMULATED_RESPONSE_US, for_km
from harness.topology.plan import Endpoint, LabPlan, NodePlan, PathPlan, PolicyPlan

MBIT = 1_000_000
DEFAULT_SPEED_BPS = 100_000 * MBIT  # a port without a link `bandwidth` (Port's default speed)
BEHAVIOR = {"End": "E", "End.X": "X", "End.DT6": "DT6", "End.DT4": "DT4", "End.DT46": "DT46",
            "End.DX4": "DX4", "End.DX6": "DX6"}
SRV6_NEXT_HOP = "SAI_NEXT_HOP_TYPE_SRV6_SIDLIST"


def sai_config(plan: LabPlan, node: NodePlan) -> dict[str, dict[str, Any]]:
    return merged(port_speeds(node), qos_maps(plan, node), buffers(plan, node), my_sids(node),
                  policy_paths(plan, node))


def merged(*documents: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """One document from several; two that set attributes of one object (a port's speed,
    its QoS maps) both keep theirs."""
    out: dict[str, dict[str, Any]] = {}
    for document in documents:
        for key, attrs in document.items():
            out[key] = {**out.get(key, {}), **attrs}
    return out


def port_speeds(node: NodePlan) -> dict[str, dict[str, Any]]:
    """Each port whose link sets a `bandwidth`, at that speed (SAI counts Mb/s)."""
    return {f"PORT|{i.name}": {"SAI_PORT_ATTR_SPEED": i.bandwidth_bps // MBIT}
            for i in node.interfaces if i.bandwidth_bps}


def qos_maps(plan: LabPlan, node: NodePlan) -> dict[str, dict[str, Any]]:
    """The lab's QoS classes (harness/topology/qos.py) as SAI's two maps, on every port."""
    if plan.qos is None:
        return {}
    document: dict[str, dict[str, Any]] = {
        "QOS_MAP|dscp_to_tc": {"SAI_QOS_MAP_ATTR_TYPE": "SAI_QOS_MAP_TYPE_DSCP_TO_TC",
                               "SAI_QOS_MAP_ATTR_MAP_TO_VALUE_LIST": pairs(plan.qos.dscp_to_tc)},
        "QOS_MAP|tc_to_queue": {"SAI_QOS_MAP_ATTR_TYPE": "SAI_QOS_MAP_TYPE_TC_TO_QUEUE",
                                "SAI_QOS_MAP_ATTR_MAP_TO_VALUE_LIST": pairs(plan.qos.tc_to_queue)}}
    for i in node.interfaces:
        document[f"PORT|{i.name}"] = {"SAI_PORT_ATTR_QOS_DSCP_TO_TC_MAP": "QOS_MAP|dscp_to_tc",
                                      "SAI_PORT_ATTR_QOS_TC_TO_QUEUE_MAP": "QOS_MAP|tc_to_queue"}
    return document


def buffers(plan: LabPlan, node: NodePlan) -> dict[str, dict[str, Any]]:
    """With a `buffer` in the lab's `qos:`, the switch's MMU as SAI objects (the port engine
    makes them real, harness/nodes/switch/sai/mmu.py): one ingress pool; per port a lossless
    priority group whose profile's XOFF_TH is the PFC headroom its cable needs (the planned
    length until `labctl headroom` measures it), eight queues (lossy ones admitted by a
    dynamic threshold, the lossless one marked by WRED from the vendor profiles' ECN), PFC on
    the lossless class and, if asked, the PFC watchdog."""
    qos = plan.qos
    if qos is None or qos.buffer is None:
        return {}
    tc, queue = qos.lossless_tc, qos.tc_to_queue[qos.lossless_tc]
    pool = "BUFFER_POOL|ingress"
    document: dict[str, dict[str, Any]] = {
        pool: {"SAI_BUFFER_POOL_ATTR_TYPE": "SAI_BUFFER_POOL_TYPE_INGRESS",
               "SAI_BUFFER_POOL_ATTR_SIZE": qos.buffer},
        "BUFFER_PROFILE|lossy": {"SAI_BUFFER_PROFILE_ATTR_POOL_ID": pool,
                                 "SAI_BUFFER_PROFILE_ATTR_SHARED_DYNAMIC_TH": 0},
        "WRED|lossless": {"SAI_WRED_ATTR_GREEN_MIN_THRESHOLD": qos.ecn["min_bytes"],
                          "SAI_WRED_ATTR_GREEN_MAX_THRESHOLD": qos.ecn["max_bytes"],
                          "SAI_WRED_ATTR_GREEN_DROP_PROBABILITY": qos.ecn["probability"],
                          "SAI_WRED_ATTR_ECN_MARK_MODE": "SAI_ECN_MARK_MODE_GREEN"}}
    shared = ({"SAI_BUFFER_PROFILE_ATTR_THRESHOLD_MODE": "SAI_BUFFER_POOL_THRESHOLD_MODE_STATIC",
               "SAI_BUFFER_PROFILE_ATTR_SHARED_STATIC_TH": qos.xoff} if qos.xoff else
              {"SAI_BUFFER_PROFILE_ATTR_SHARED_DYNAMIC_TH": 0})
    for i in node.interfaces:
        link = plan.link_at(Endpoint(node=node.name, iface=i.name))
        speed = i.bandwidth_bps or DEFAULT_SPEED_BPS
        room = for_km(link.distance_km or 0.0, speed, i.mtu, EMULATED_RESPONSE_US)
        profile = f"BUFFER_PROFILE|lossless-{i.name}"
        document[profile] = {"SAI_BUFFER_PROFILE_ATTR_POOL_ID": pool, **shared,
                             "SAI_BUFFER_PROFILE_ATTR_XOFF_TH": room.bytes,
                             "SAI_BUFFER_PROFILE_ATTR_XON_OFFSET_TH": 2 * i.mtu}
        document[f"INGRESS_PRIORITY_GROUP|{i.name}-{tc}"] = {
            "SAI_INGRESS_PRIORITY_GROUP_ATTR_PORT": f"PORT|{i.name}",
            "SAI_INGRESS_PRIORITY_GROUP_ATTR_INDEX": tc,
            "SAI_INGRESS_PRIORITY_GROUP_ATTR_BUFFER_PROFILE": profile}
        for q in range(8):
            lossless = q == queue
            document[f"QUEUE|{i.name}-{q}"] = {
                "SAI_QUEUE_ATTR_PORT": f"PORT|{i.name}", "SAI_QUEUE_ATTR_INDEX": q,
                **({"SAI_QUEUE_ATTR_WRED_PROFILE_ID": "WRED|lossless"} if lossless and qos.mark
                   else {} if lossless else
                   {"SAI_QUEUE_ATTR_BUFFER_PROFILE_ID": "BUFFER_PROFILE|lossy"}),
                **({"SAI_QUEUE_ATTR_ENABLE_PFC_DLDR": True}
                   if lossless and qos.watchdog_ms else {})}
        port: dict[str, Any] = {"SAI_PORT_ATTR_PRIORITY_FLOW_CONTROL": 1 << tc if qos.pfc else 0}
        if qos.watchdog_ms:
            port["SAI_PORT_ATTR_PFC_TC_DLD_INTERVAL"] = [[tc, qos.watchdog_ms[0]]]
            port["SAI_PORT_ATTR_PFC_TC_DLR_INTERVAL"] = [[tc, qos.watchdog_ms[1]]]
        document[f"PORT|{i.name}"] = port
    return document


def pairs(mapping: dict[int, int]) -> list[list[int]]:
    """A QoS map's list as JSON keeps it: pairs (an object's keys would turn to text)."""
    return [[k, v] for k, v in sorted(mapping.items())]


def my_sids(node: NodePlan) -> dict[str, dict[str, Any]]:
    """A my-SID entry per SID; End.X and End.DX* with the next hop they cross to."""
    document: dict[str, dict[str, Any]] = {}
    for sid in node.sids:
        attrs: dict[str, Any] = {"SAI_MY_SID_ENTRY_ATTR_ENDPOINT_BEHAVIOR":
                                 f"SAI_MY_SID_ENTRY_ENDPOINT_BEHAVIOR_{BEHAVIOR[sid.behavior]}"}
        if sid.behavior.startswith("End.DT"):  # a lookup in the switch's one VRF
            attrs["SAI_MY_SID_ENTRY_ATTR_VRF"] = "VIRTUAL_ROUTER|default"
        if sid.nexthop is not None:
            family = "v4" if sid.behavior == "End.DX4" else "v6"
            hop = f"NEXT_HOP|{sid.iface}-{family}"
            document[hop] = {"SAI_NEXT_HOP_ATTR_TYPE": "SAI_NEXT_HOP_TYPE_IP",
                             "SAI_NEXT_HOP_ATTR_IP": sid.nexthop,
                             "SAI_NEXT_HOP_ATTR_ROUTER_INTERFACE_ID":
                                 f"ROUTER_INTERFACE|{sid.iface}"}
            attrs["SAI_MY_SID_ENTRY_ATTR_NEXT_HOP_ID"] = hop
        document[f"MY_SID_ENTRY|{sid.sid}"] = attrs
    return document


def path_key(policy: PolicyPlan, path: PathPlan) -> str:
    return policy.name if path is policy.path else f"{policy.name}-fallback"


def headed(plan: LabPlan, node: NodePlan) -> list[PolicyPlan]:
    return [p for p in plan.srv6.policies if p.headend == node.name] if plan.srv6 else []


def policy_paths(plan: LabPlan, node: NodePlan) -> dict[str, dict[str, Any]]:
    """For each policy the node heads, each path's SID list and the next hop into it (H.Encaps);
    the route to it is the TE layer's (te_policies)."""
    document: dict[str, dict[str, Any]] = {}
    for policy in headed(plan, node):
        for path in filter(None, (policy.path, policy.fallback)):
            key = path_key(policy, path)
            document[f"SRV6_SIDLIST|{key}"] = {
                "SAI_SRV6_SIDLIST_ATTR_TYPE": "SAI_SRV6_SIDLIST_TYPE_ENCAPS",
                "SAI_SRV6_SIDLIST_ATTR_SEGMENT_LIST": list(path.segments)}
            document[f"NEXT_HOP|{key}"] = {
                "SAI_NEXT_HOP_ATTR_TYPE": SRV6_NEXT_HOP,
                "SAI_NEXT_HOP_ATTR_SRV6_SIDLIST_ID": f"SRV6_SIDLIST|{key}",
                "SAI_NEXT_HOP_ATTR_ROUTER_INTERFACE_ID": f"ROUTER_INTERFACE|{path.iface}"}
    return document


def te_policies(plan: LabPlan, node: NodePlan) -> dict[str, Any]:
    """The policies the node heads, as its agent's TE layer takes them
    (harness/nodes/switch/agent/te.py): the prefix each steers, its paths in order of preference
    with the next hop (a key of the SAI document) and the SID list its probes take; the probes'
    source, the loopback."""
    srv6 = plan.srv6
    return {"source": node.loopback6, "policies": [
        {"name": policy.name, "prefix": policy.destination,
         "probe_interval_us": srv6.probe_interval_us, "probe_misses": srv6.probe_misses,
         "probe_up": srv6.probe_up, "hold_down_us": srv6.hold_down_us,
         "paths": [{"next_hop": f"NEXT_HOP|{path_key(policy, path)}", "hops": path.hops,
                    "probe": path.probe}
                   for path in filter(None, (policy.path, policy.fallback))]}
        for policy in headed(plan, node) if srv6 is not None]}
