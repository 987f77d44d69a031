"""containerlab's precedence for a node's settings: defaults < kinds < groups < the node.

The kind comes from the node, else its group, else the defaults' group, else the defaults; the
group from the node, else its kind's entry, else the defaults. Then each key merges as
containerlab merges it: `exec` lists run in order (defaults first), `env`, `labels` and
`sysctls` merge key by key, `binds` merge by their target path (the most specific wins), and
every other key is taken from the most specific layer that sets it.
"""

from __future__ import annotations

from typing import Any

from harness.topology.schema import Kind, NodeFields, NodeSpec, TopologySpec

CONCATENATED = ("exec",)
MERGED_MAPS = ("env", "labels", "sysctls")


def node_kind(topo: TopologySpec, node: NodeFields) -> Kind:
    """containerlab's order; fabric-lab's own default is a plain FRR router."""
    for layer in (node, topo.groups.get(node.group or ""),
                  topo.groups.get(topo.defaults.group or "")):
        if layer is not None and layer.kind is not None:
            return layer.kind
    return topo.defaults.kind or Kind.frr


def node_group(topo: TopologySpec, node: NodeFields, kind: Kind) -> str | None:
    kind_entry = topo.kinds.get(kind)
    return node.group or (kind_entry.group if kind_entry else None) or topo.defaults.group


def bind_target(bind: str) -> str:
    """SRC:DST[:MODE] -> DST (what containerlab indexes binds by)."""
    parts = bind.split(":")
    return parts[1] if len(parts) > 1 else parts[0]


def layers(topo: TopologySpec, node: NodeFields) -> list[NodeFields]:
    """The node's layers, least specific first."""
    kind = node_kind(topo, node)
    group = node_group(topo, node, kind)
    found = [topo.defaults, topo.kinds.get(kind), topo.groups.get(group or ""), node]
    return [layer for layer in found if layer is not None]


def merged_node(topo: TopologySpec, node: NodeFields) -> NodeFields:
    """One node with every layer applied (its group must exist: see validate)."""
    kind = node_kind(topo, node)
    values: dict[str, Any] = {}
    binds: dict[str, str] = {}
    for layer in layers(topo, node):
        for key in layer.model_fields_set:
            value = getattr(layer, key)
            if key in CONCATENATED:
                values[key] = [*values.get(key, []), *value]
            elif key in MERGED_MAPS:
                values[key] = {**values.get(key, {}), **value}
            elif key == "binds":
                binds.update((bind_target(b), b) for b in value)
            else:
                values[key] = value
    values["binds"] = list(binds.values())
    values["kind"] = kind
    values["group"] = node_group(topo, node, kind)
    return NodeSpec.model_validate(values)
