"""Draw a lab plan: Graphviz dot, Mermaid, or a self-contained HTML page with an SVG.

Nodes are layered by role (hosts at the bottom, super-spines and backbones on top) and grouped
by plane, which is how fabric diagrams are drawn; HTML needs no network or JavaScript.
"""

from __future__ import annotations

import html

from harness.topology.plan import LabPlan, LinkPlan, NodePlan
from harness.topology.schema import Role
from harness.topology.units import format_duration_us

TIER = {Role.host: 0, Role.scaleup: 0, Role.leaf: 1, Role.spine: 2, Role.superspine: 3,
        Role.backbone: 4}


def tiers(plan: LabPlan) -> dict[str, int]:
    """A fabric node's tier is its role's; a user's node has no role, so its tier is its hop
    count from the nearest plain node (servers and bridges at the bottom, as drawn by hand)."""
    found = {n.name: TIER[n.role] for n in plan.nodes if n.role is not None}
    frontier = [n.name for n in plan.nodes
                if n.role is None and not n.runs_frr]
    found.update(dict.fromkeys(frontier, 0))
    while frontier:
        nxt = []
        for name in frontier:
            for iface in plan.node(name).interfaces:
                peer = iface.peer.node
                if peer not in found:
                    found[peer] = found[name] + 1
                    nxt.append(peer)
        frontier = nxt
    return {n.name: found.get(n.name, 1) for n in plan.nodes}


def caption(node: NodePlan) -> str:
    if node.role is not None:
        return f"{node.role.value} AS{node.asn}"
    return f"{node.kind.value} {node.image or ''}".strip()


def _label(link: LinkPlan) -> str:
    parts = []
    if link.distance_km:
        parts.append(f"{link.distance_km:g} km")
    if link.impairment.delay_us:
        parts.append(format_duration_us(link.impairment.delay_us))
    return ", ".join(parts)


def to_dot(plan: LabPlan) -> str:
    lines = [f'graph "{plan.name}" {{', "  rankdir=BT; node [shape=box, style=rounded];"]
    tier = tiers(plan)
    for level in sorted(set(tier.values())):
        members = [n.name for n in plan.nodes if tier[n.name] == level]
        lines.append("  { rank=same; " + " ".join(f'"{m}";' for m in members) + " }")
    for n in plan.nodes:
        address = f"\\n{n.loopback4}" if n.loopback4 else ""
        lines.append(f'  "{n.name}" [label="{n.name}\\n{caption(n)}{address}"];')
    for link in plan.links:
        label = _label(link)
        attrs = f' [taillabel="{link.a.iface}", headlabel="{link.b.iface}"' + (
            f', label="{label}"]' if label else "]")
        lines.append(f'  "{link.a.node}" -- "{link.b.node}"{attrs};')
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_mermaid(plan: LabPlan) -> str:
    lines = ["graph BT"]
    for n in plan.nodes:
        lines.append(f'  {n.name}["{n.name}<br/>{caption(n)}"]')
    for link in plan.links:
        label = _label(link)
        edge = f"-- {label} ---" if label else "---"
        lines.append(f"  {link.a.node} {edge} {link.b.node}")
    return "\n".join(lines) + "\n"


def layout(plan: LabPlan, width: int = 1200, row: int = 140) -> dict[str, tuple[float, float]]:
    """x by order within a tier (sorted by plane, then name), y by tier."""
    tier = tiers(plan)
    positions = {}
    for level, value in enumerate(sorted(set(tier.values()), reverse=True)):
        members = sorted((n for n in plan.nodes if tier[n.name] == value),
                         key=lambda n: (n.plane if n.plane is not None else -1, n.name))
        for i, n in enumerate(members):
            positions[n.name] = ((i + 0.5) * width / len(members), 60 + level * row)
    return positions


def to_html(plan: LabPlan) -> str:
    pos = layout(plan)
    height = max(y for _, y in pos.values()) + 80
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="1200" height="{height:.0f}" '
             'font-family="sans-serif" font-size="11">']
    for link in plan.links:
        (x1, y1), (x2, y2) = pos[link.a.node], pos[link.b.node]
        title = html.escape(f"{link.a} -- {link.b} {_label(link)}")
        parts.append(f'<line x1="{x1:.0f}" y1="{y1:.0f}" x2="{x2:.0f}" y2="{y2:.0f}" '
                     f'stroke="#8895a7"><title>{title}</title></line>')
    for n in plan.nodes:
        x, y = pos[n.name]
        title = html.escape(f"{n.name} {caption(n)} {n.loopback4 or ''} {n.loopback6 or ''}")
        parts.append(f'<g><title>{title}</title><rect x="{x - 42:.0f}" y="{y - 14:.0f}" '
                     'width="84" height="28" rx="6" fill="#eef3fb" stroke="#3b6fb6"/>'
                     f'<text x="{x:.0f}" y="{y + 4:.0f}" text-anchor="middle">'
                     f"{html.escape(n.name)}</text></g>")
    parts.append("</svg>")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{plan.name}</title>"
            f"</head><body><h1>{html.escape(plan.name)}</h1>{''.join(parts)}</body></html>\n")


FORMATS = {"dot": to_dot, "mermaid": to_mermaid, "html": to_html}
