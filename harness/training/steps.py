"""Carrying out an exercise's steps (its setup, or its reference solution) on a running lab,
through the same channels an operator has: vtysh, a shell in the node, the SAI agent's control
socket and its configuration document."""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Iterable

from harness.core.errors import LabError
from harness.core.wait import wait_until
from harness.deploy.lab import Lab
from harness.faults.targets import ports_toward, select_nodes
from harness.nodes.switch.agent.client import CONFIG_FILE, ask
from harness.training.exercise import Exec, Flap, Sai, SaiDocument, Settle, Step, Vtysh
from harness.training.template import Renderer

FLAP_LOG = "flap.log"


def run_steps(lab: Lab, steps: Iterable[Step]) -> list[str]:
    """Do each step in order; return what was done, a line per node, as a person would say it."""
    render = Renderer(lab.plan).render
    done: list[str] = []
    for step in steps:
        if isinstance(step, Vtysh | Exec | Sai):
            for node in select_nodes(lab.plan, render(step.nodes)):
                done.append(f"{node}: {_on_node(lab, node, step, render)}")
        elif isinstance(step, SaiDocument):
            done += _edit_document(lab, render(step.node), render(step.set))
        elif isinstance(step, Flap):
            done.append(_start_flapping(lab, render(step.node), render(step.toward), step))
        elif isinstance(step, Settle):
            done.append(_settle(lab, select_nodes(lab.plan, render(step.nodes)),
                                step.timeout_s))
    return done


def _on_node(lab: Lab, node: str, step: Vtysh | Exec | Sai, render) -> str:
    if isinstance(step, Vtysh):
        lines = render(step.lines, node)
        lab.frr(node).vtysh("configure terminal", *lines)
        return "vtysh: " + " / ".join(lines)
    if isinstance(step, Exec):
        cmd = render(step.cmd, node)
        result = lab.runtime.run(node, ["sh", "-c", cmd], timeout=60)
        if result.returncode != 0:
            raise LabError(f"{node}: `{cmd}` failed ({result.returncode}): "
                           f"{(result.stderr or result.stdout).strip()}")
        return cmd
    request = render(step.request, node)
    ask(lab.node_dir(node), request)
    return f"SAI agent: {json.dumps(request)}"


def _edit_document(lab: Lab, node: str, changes: dict[str, dict[str, object]]) -> list[str]:
    path = lab.node_dir(node) / CONFIG_FILE
    document = json.loads(path.read_text())
    for key, attrs in changes.items():
        if key not in document:
            raise LabError(f"{node}'s {CONFIG_FILE} has no object {key}")
        document[key].update(attrs)
    path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    result = ask(lab.node_dir(node), {"cmd": "apply", "dry_run": False})
    if result["failed"]:
        raise LabError(f"{node} refused its document: {result['failed']}")
    return [f"{node}: {CONFIG_FILE}: {key} {attrs}; labctl sai {node} apply"
            for key, attrs in changes.items()]


def _start_flapping(lab: Lab, node: str, toward: str, step: Flap) -> str:
    """A loop the runtime records, so destroy ends it with the lab on every runtime."""
    ports = ports_toward(lab.plan, node, toward)
    names = " ".join(shlex.quote(p) for p in ports)
    loop = (f"while :; do for p in {names}; do ip link set dev $p down; done; "
            f"sleep {step.down_s}; for p in {names}; do ip link set dev $p up; done; "
            f"sleep {step.up_s}; done")
    lab.runtime.spawn(node, ["sh", "-c", loop], lab.node_dir(node) / FLAP_LOG,
                      f"{node}/flap")
    return (f"{node}: ports {', '.join(ports)} to {toward} flap: {step.down_s:g} s down, "
            f"{step.up_s:g} s up")


def _settle(lab: Lab, nodes: list[str], timeout: float) -> str:
    """Every session Established and the prefixes received unchanged over a second: the
    updates that follow a session's start have arrived (the lab sends them at once)."""
    routers = [n for n in nodes if lab.plan.node(n).runs_frr]
    began = time.monotonic()
    reads: list[tuple[list[str], int]] = []

    def read() -> list[tuple[list[str], int]]:
        """Every read so far: the sessions down and the prefixes received."""
        down, received = [], 0
        for node in routers:
            for family in lab.frr(node).show_json("bgpd", "show bgp summary").values():
                for peer, info in family.get("peers", {}).items():
                    if info.get("state") != "Established":
                        down.append(f"{node}->{peer}")
                    received += info.get("pfxRcd", 0)
        reads.append((down, received))
        return reads

    def settled(reads: list[tuple[list[str], int]]) -> bool:
        return len(reads) > 1 and not reads[-2][0] and not reads[-1][0] \
            and reads[-2][1] == reads[-1][1]

    wait_until(read, timeout, lambda _: LabError(
        f"not settled after {timeout:g} s; sessions down: {', '.join(reads[-1][0]) or 'none'}"),
        every=1.0, until=settled)
    return (f"BGP sessions of {len(routers)} node(s) Established, {reads[-1][1]} prefixes "
            f"received, after {time.monotonic() - began:.1f} s")
