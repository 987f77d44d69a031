"""Exercise strings as Jinja templates over a lab's plan, so an exercise names what it breaks
the way an operator does (`{{ peer_ip('leaf2', 'spine1') }}`, `{{ asn('spine1') + 1 }}`)
instead of addresses a generator happens to give today. Sandboxed: an exercise file is
data, not code, and an unknown name is an error, not an empty string."""

from __future__ import annotations

from typing import Any

from jinja2 import StrictUndefined, TemplateError
from jinja2.sandbox import SandboxedEnvironment

from harness.core.errors import LabError
from harness.faults.targets import ports_toward, select_nodes
from harness.topology.plan import LabPlan, NodePlan


def _context(plan: LabPlan) -> dict[str, Any]:
    def session(node: str, peer: str):
        for s in plan.sessions_of(node):
            if s.peer == peer:
                return s
        raise LabError(f"{node} has no BGP session with {peer}")

    def node(name: str) -> NodePlan:
        return plan.node(name)

    def policy(name: str):
        for p in plan.srv6.policies if plan.srv6 else ():
            if p.name == name:
                return p
        raise LabError(f"lab {plan.name} has no SRv6 policy {name!r}")

    return {"plan": plan, "node": node,
            "nodes": lambda spec: [plan.node(n) for n in select_nodes(plan, spec)],
            "asn": lambda name: plan.node(name).asn,
            "peer_ip": lambda a, b: session(a, b).peer_ip,
            "local_ip": lambda a, b: session(a, b).local_ip,
            "policy": policy,
            "ports": lambda node, toward: ports_toward(plan, node, toward)}


class Renderer:
    def __init__(self, plan: LabPlan) -> None:
        self.env = SandboxedEnvironment(undefined=StrictUndefined, keep_trailing_newline=False)
        self.env.globals.update(_context(plan))

    def render(self, value: Any, this: str | None = None) -> Any:
        """Every string inside `value` rendered (`this`: the node a step is doing it on); a
        string that renders to a whole number becomes one."""
        if isinstance(value, str):
            try:
                text = self.env.from_string(value).render(this=this)
            except TemplateError as exc:
                raise LabError(f"template {value!r}: {exc}") from None
            return int(text) if text.strip().lstrip("-").isdigit() and "{" in value else text
        if isinstance(value, list):
            return [self.render(v, this) for v in value]
        if isinstance(value, dict):
            return {self.render(k, this): self.render(v, this) for k, v in value.items()}
        return value
