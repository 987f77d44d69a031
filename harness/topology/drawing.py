"""Draw a lab plan: Graphviz dot, Mermaid, or a self-contained HTML page with an SVG.

Nodes are layered by role (hosts at the bottom, super-spines and backbones on top) and grouped
by plane, which is how fabric diagrams are drawn; in HTML each plane is a column of its own
colour and the drawing scales to the page. HTML needs no network or JavaScript.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from harness.topology.plan import LabPlan, LinkPlan, NodePlan
from harness.topology.schema import Role
from harness.topology.units import format_duration_us

TIER = {Role.host: 0, Role.scaleup: 1, Role.leaf: 1, Role.spine: 2, Role.superspine: 3,
        Role.bag: 4, Role.backbone: 5}


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
        where = " ".join(filter(None, (node.region, node.building)))
        return f"{node.role.value} AS{node.asn}" + (f" ({where})" if where else "")
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


# The HTML drawing's measures, in SVG units: a box fits its name at the font's widest
# average glyph (sans-serif at 11 px: under 6.6 units a character, measured in Chromium).
FONT_PX, CHAR_W, BOX_H, BOX_GAP, GROUP_GAP, ROW, MARGIN = 11, 6.6, 28, 12, 24, 110, 20


@dataclass(frozen=True)
class Box:
    x: float  # centre
    y: float
    width: float
    group: int | None  # index of its Group, for its colour


@dataclass(frozen=True)
class Group:
    """A plane's nodes (or a region's), drawn together in their own colour."""

    label: str
    left: float
    width: float
    bottom: float  # below its lowest tier (hosts of no plane are drawn below it)


def group_of(node: NodePlan) -> str | None:
    """A node's column: its plane (FPF), else its region (BAG), else none."""
    return f"plane {node.plane}" if node.plane is not None else \
        f"region {node.region}" if node.region else None


@dataclass(frozen=True)
class Layout:
    boxes: dict[str, Box]
    groups: list[Group]
    width: float
    height: float


def box_width(name: str) -> float:
    return max(64.0, round(len(name) * CHAR_W + 18))


def layout(plan: LabPlan) -> Layout:
    """Tiers top to bottom (BAG, super-spines, spines, leaves, hosts); within them, each
    plane's nodes side by side in a group of their own, as FPF is drawn (or each region's,
    for BAG); nodes of neither (FPF's hosts, a user's nodes) spread over the whole width."""
    tier = tiers(plan)
    levels = sorted(set(tier.values()), reverse=True)
    y_of = {level: MARGIN + 30 + i * ROW for i, level in enumerate(levels)}
    members: dict[str, list[NodePlan]] = {}
    for n in plan.nodes:
        if (key := group_of(n)) is not None:
            members.setdefault(key, []).append(n)
    labels = sorted(members, key=lambda k: (len(k), k))  # plane 2 before plane 10

    def row_width(nodes: list[NodePlan]) -> float:
        return sum(box_width(n.name) + BOX_GAP for n in nodes)

    widths = {k: max(row_width([n for n in members[k] if tier[n.name] == level])
                     for level in levels) for k in labels}
    shared = [n for n in plan.nodes if group_of(n) is None]
    width = max(sum(widths.values()) + GROUP_GAP * max(len(labels) - 1, 0),
                *(row_width([n for n in shared if tier[n.name] == level]) for level in levels))
    boxes, groups, left = {}, [], MARGIN
    for index, key in enumerate(labels):
        bottom = max(y_of[tier[n.name]] for n in members[key]) + BOX_H / 2 + 8
        groups.append(Group(key, left, widths[key], bottom))
        for level in levels:
            _place(sorted((n for n in members[key] if tier[n.name] == level),
                          key=lambda n: n.name), left, widths[key], y_of[level], index, boxes)
        left += widths[key] + GROUP_GAP
    for level in levels:
        _place([n for n in shared if tier[n.name] == level], MARGIN, width, y_of[level], None,
               boxes)
    return Layout(boxes, groups, width + 2 * MARGIN, y_of[levels[-1]] + BOX_H + MARGIN)


def _place(nodes: list[NodePlan], left: float, span: float, y: float, group: int | None,
           boxes: dict[str, Box]) -> None:
    """`nodes` in a row, spread evenly over `span` (each in a slot at least its box wide)."""
    if not nodes:
        return
    slot = span / len(nodes)
    for i, n in enumerate(nodes):
        boxes[n.name] = Box(left + (i + 0.5) * slot, y, box_width(n.name), group)


def group_colour(group: int | None, groups: int, light: bool = False) -> str:
    if group is None:
        return "#eef1f5" if light else "#5b6573"
    hue = round(group * 360 / max(groups, 1)) % 360
    return f"hsl({hue} 65% {'94%' if light else '40%'})"


def to_html(plan: LabPlan) -> str:
    drawn = layout(plan)
    boxes, count = drawn.boxes, len(drawn.groups)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {drawn.width:.0f} '
             f'{drawn.height:.0f}" width="100%" font-family="sans-serif" '
             f'font-size="{FONT_PX}">']
    for index, group in enumerate(drawn.groups):
        parts.append(f'<rect class="group" x="{group.left - 6:.0f}" y="{MARGIN:.0f}" '
                     f'width="{group.width + 12 - BOX_GAP:.0f}" '
                     f'height="{group.bottom - MARGIN:.0f}" rx="8" '
                     f'fill="{group_colour(index, count, light=True)}"/>'
                     f'<text x="{group.left + (group.width - BOX_GAP) / 2:.0f}" '
                     f'y="{group.bottom - 6:.0f}" text-anchor="middle" '
                     f'fill="{group_colour(index, count)}">{html.escape(group.label)}</text>')
    for link in plan.links:
        a, b = boxes[link.a.node], boxes[link.b.node]
        group = a.group if a.group is not None else b.group
        title = html.escape(f"{link.a} -- {link.b} {_label(link)}")
        # within a row (BAG to BAG), an arc over the boxes between the two ends
        bend = a.y - min(ROW * 0.45, abs(a.x - b.x) * 0.15) if a.y == b.y else (a.y + b.y) / 2
        parts.append(f'<path class="link" data-link="{html.escape(link.name)}" '
                     f'd="M{a.x:.0f} {a.y:.0f} Q{(a.x + b.x) / 2:.0f} '
                     f'{bend:.0f} {b.x:.0f} {b.y:.0f}" fill="none" '
                     f'stroke="{group_colour(group, count)}" stroke-opacity="0.55">'
                     f"<title>{title}</title></path>")
    for n in plan.nodes:
        box = boxes[n.name]
        title = html.escape(f"{n.name} {caption(n)} {n.loopback4 or ''} {n.loopback6 or ''}")
        parts.append(f'<g class="node"><title>{title}</title><rect x="{box.x - box.width / 2:.0f}" '
                     f'y="{box.y - BOX_H / 2:.0f}" width="{box.width:.0f}" height="{BOX_H}" '
                     f'rx="6" fill="{group_colour(box.group, count, light=True)}" '
                     f'stroke="{group_colour(box.group, count)}"/>'
                     f'<text x="{box.x:.0f}" y="{box.y + 4:.0f}" text-anchor="middle">'
                     f"{html.escape(n.name)}</text></g>")
    parts.append("</svg>")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{plan.name}</title>"
            "<style>body{margin:1em;font-family:sans-serif}svg{max-width:100%;height:auto}"
            f"</style></head><body><h1>{html.escape(plan.name)}</h1>{''.join(parts)}"
            "</body></html>\n")


FORMATS = {"dot": to_dot, "mermaid": to_mermaid, "html": to_html}
