"""A `kind: sai` switch: FRR whose zebra feeds the SAI agent over FPM; transit packets are
forwarded by what the agent programmed, never by zebra's own kernel routes.

How double programming is avoided. zebra 8.4 has no way to turn its kernel dataplane off, so
it still writes its routes to table main. On a switch node that table serves only the CPU, as
the kernel routes of a SONiC box do: the ip rules are `local` (the node's own addresses), then
`iif lo lookup main` (packets the node itself originates: BGP, BFD, pings from the switch, and
the kernel's own gateway checks when zebra installs a nexthop), then `lookup 252` (the SAI
table), and nothing else; the `main` rule is deleted. A packet arriving on a port therefore
only ever matches the SAI table: a route withdrawn in FRR stops forwarding when the agent
removes it, and a route the agent failed to program does not forward though zebra has it.
"""

from __future__ import annotations

import json
import socket
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core.errors import LabError
from harness.linux.processes import kill_and_reap
from harness.nodes.base import Evidence
from harness.nodes.frr import RT_TABLE_MAIN, Frr, FrrKind, frr_of, worse_state
from harness.nodes.port import engine as port_engine
from harness.nodes.switch.agent.client import CONFIG_FILE, SOCKET_NAME, TE_FILE, ask
from harness.nodes.switch.agent.fpm import FPM_PORT
from harness.nodes.switch.platform.lifecycle import platform_alarms, start_platform
from harness.nodes.switch.render import sai_config, te_policies
from harness.nodes.switch.sai import srv6_engine
from harness.nodes.switch.sai.kernel import SAI_TABLE
from harness.runtime.base import NodeImage
from harness.runtime.images import REPOSITORY
from harness.topology.fibre import one_way_delay_us
from harness.topology.plan import Endpoint, LabPlan, NodePlan
from harness.topology.platforms import DEFAULT_PLATFORM

if TYPE_CHECKING:
    from harness.runtime.context import LabContext

SAI_RULE_PREF = 1000
MAIN_RULE_PREF = 32766
CPU_RULE_PREF = 999
AGENT_START_S = 20.0
SAI_EVIDENCE = {"status": {"cmd": "status"}, "dump": {"cmd": "dump"},
                "counters": {"cmd": "counters"}, "config": {"cmd": "config"},
                "trace": {"cmd": "trace", "lines": 200}}
EVIDENCE_TIMEOUT_S = 10.0


def fpm_config(port: int = FPM_PORT) -> str:
    # use-next-hop-groups is zebra 8.4's default; said explicitly so the agent's input is fixed.
    return f"!\nfpm address 127.0.0.1 port {port}\nfpm use-next-hop-groups\n!\n"


def agent_log(frr: Frr) -> Path:
    return frr.workdir / "agent.log"


def install_rules(lab: LabContext, node: str) -> None:
    """local -> (own traffic: main) -> SAI table -> nothing: see the module docstring."""
    with lab.node(node).netlink() as ip:
        for family in (socket.AF_INET, socket.AF_INET6):
            ip.rule("add", family=family, table=RT_TABLE_MAIN, priority=CPU_RULE_PREF,
                    iifname="lo")
            ip.rule("add", family=family, table=SAI_TABLE, priority=SAI_RULE_PREF)
            ip.rule("del", family=family, table=RT_TABLE_MAIN, priority=MAIN_RULE_PREF)


def port_speeds(status: dict[str, Any]) -> str:
    """An agent's port speeds in short: 2x400G 1x100G."""
    speeds = Counter(status["port_speeds"].values())
    return " ".join(f"{n}x{_speed(mbit)}" for mbit, n in sorted(speeds.items(), reverse=True))


def _speed(mbit: int) -> str:
    return f"{mbit // 1000}G" if mbit % 1000 == 0 else f"{mbit}M"


def agent_pid(frr: Frr) -> int:
    """The running agent's pid as its node sees it (it answers on its control socket)."""
    return int(ask(frr.workdir, {"cmd": "status"}, timeout=2)["pid"])


def start_agent(lab: LabContext, node: str) -> int:
    """Start the agent inside the node (recorded, so destroy ends it); return its pid once
    its control socket answers."""
    frr, runtime = frr_of(lab, node), lab.runtime
    (frr.workdir / SOCKET_NAME).unlink(missing_ok=True)
    _, pid = lab.start_helper(node, runtime.python(
        "harness.nodes.switch.agent", "--node-dir", str(frr.workdir), "--platform",
        lab.plan.node(node).platform or DEFAULT_PLATFORM,
        "--srv6-engine", runtime.program(srv6_engine.ENGINE),
        "--port-engine", runtime.program(port_engine.ENGINE), *_cables(lab.plan, node),
        "--lab-dir", str(lab.dir)),
        "SAI agent",
        frr.workdir / "agent.out", agent_log(frr), lambda: agent_pid(frr), AGENT_START_S)
    return pid


def _cables(plan: LabPlan, node: str) -> list[str]:
    """`--cable PORT=US` for each of the node's ports whose link has a planned length."""
    args = []
    for i in plan.node(node).interfaces:
        km = plan.link_at(Endpoint(node=node, iface=i.name)).distance_km
        if km:
            args += ["--cable", f"{i.name}={one_way_delay_us(km)}"]
    return args


def restart_agent(lab: LabContext, node: str) -> tuple[int | None, int]:
    """Warm restart: SIGKILL the agent (no goodbye, like a crash) and start a new one, which
    reads the kernel back and reconciles with zebra's replay. Returns both pids."""
    try:
        old: int | None = agent_pid(frr_of(lab, node))
    except LabError:
        old = None
    if old is not None and (host := lab.runtime.host_pid(node, old)) is not None:
        kill_and_reap([host])
    return old, start_agent(lab, node)


class SaiKind(FrrKind):
    """FRR whose zebra loads dplane_fpm_nl and feeds the agent; the agent starts first, so
    zebra's first FPM connection finds it listening."""

    name = "sai"
    fib_table = SAI_TABLE
    port_engine = True
    needs: Mapping[str, str] = {
        "nexthop_groups": "kernel nexthop groups, which SAI switches program ECMP into"}
    zebra_args = ("-M", "dplane_fpm_nl")

    def config(self, lab: LabContext, node: NodePlan, frr: Frr, *, boot: bool = False) -> str:
        return super().config(lab, node, frr, boot=boot) + fpm_config()

    def before_frr(self, lab: LabContext, node: NodePlan, *, fresh: bool) -> None:
        """The rules and the SAI table outlive a crash, so only a fresh node gets rules and
        its configuration document as the plan renders it (after a crash, the document as
        the user last edited it stays); a restarted agent reads the table back and
        reconciles it with what zebra replays and with the document."""
        if fresh:
            install_rules(lab, node.name)
            document = json.dumps(sai_config(lab.plan, node), indent=1, sort_keys=True)
            (lab.node_dir(node.name) / CONFIG_FILE).write_text(document + "\n")
            policies = json.dumps(te_policies(lab.plan, node), indent=1)
            (lab.node_dir(node.name) / TE_FILE).write_text(policies + "\n")
        start_agent(lab, node.name)
        start_platform(lab, node)

    def image(self, node: NodePlan) -> NodeImage:
        return NodeImage(f"{REPOSITORY}/switch", None)

    def evidence(self, lab: LabContext, node: NodePlan) -> Evidence:
        """Adds the agent's objects, counters, configuration state and last SAI calls."""
        workdir = frr_of(lab, node.name).workdir
        return {**super().evidence(lab, node),
                "sai": {key: (lambda r=request: ask(workdir, r, timeout=EVIDENCE_TIMEOUT_S))
                        for key, request in SAI_EVIDENCE.items()}}

    def status(self, lab: LabContext, node: NodePlan) -> dict[str, Any]:
        """Adds column `sai`: the agent's own verdict, or down if it does not answer."""
        status = super().status(lab, node)
        try:
            agent = ask(frr_of(lab, node.name).workdir, {"cmd": "status"}, timeout=3)
        except LabError:
            return {**status, "state": worse_state(status["state"], "degraded"),
                    "sai": "agent down"}
        platform = f"{node.platform}: " if node.platform else ""
        summary = f"{platform}{agent['routes_programmed']} routes; ports {port_speeds(agent)}"
        alarms = platform_alarms(lab, node.name)
        for reason in [*agent["reasons"], *alarms]:
            summary += f"; {reason}"
        state = worse_state(status["state"], agent["state"])
        return {**status, "state": worse_state(state, "degraded") if alarms else state,
                "sai": summary, "platform": node.platform or DEFAULT_PLATFORM}
