"""Render FRR configuration from a LabPlan (pure: plan in, text out)."""

from __future__ import annotations

from functools import cache

import jinja2

from harness.topology.plan import LabPlan, NodePlan


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("harness.topology", "templates"),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True)


def render_frr(plan: LabPlan, node: NodePlan, log_file: str) -> str:
    template = _environment().get_template("frr.conf.j2")
    return template.render(plan=plan, node=node, sessions=plan.sessions_of(node.name),
                           log_file=log_file)
