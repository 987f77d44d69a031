"""Start spray agents at deploy and read what they do (for `inspect`, tests and benches).

A host gets an agent when its NICs reach more than one plane; a single-homed host (the clos
lab) has nothing to spray over and keeps plain kernel routing.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.core.errors import LabError
from harness.core.wait import none_left, wait_until
from harness.spray import probe, schedule
from harness.topology.plan import LabPlan, NodePlan
from harness.topology.schema import Kind

if TYPE_CHECKING:
    from harness.runtime.context import LabContext
STATE_FILE = "spray.json"
CONFIG_FILE = "spray-config.json"
LOG_FILE = "spray.log"
WAIT_POLL_S = 0.05


def nic_planes(plan: LabPlan, node: NodePlan) -> dict[str, int]:
    """NIC name -> plane of the switch it is cabled to."""
    planes = {}
    for iface in node.interfaces:
        plane = plan.node(iface.peer.node).plane
        if plane is not None:
            planes[iface.name] = plane
    return planes


def sprays(plan: LabPlan, node: NodePlan) -> bool:
    """A `host` (augment makes every host cabled to several planes one); a host cabled to one
    plane has nothing to spray over and keeps plain kernel routing."""
    return node.kind is Kind.host


def spraying_hosts(plan: LabPlan) -> list[NodePlan]:
    return [n for n in plan.nodes if sprays(plan, n)]


def probe_timing(plan: LabPlan) -> schedule.Timing | None:
    """The lab's probe schedule, or None when it has no probes (or nothing to spray)."""
    hosts = spraying_hosts(plan)
    if plan.probes is None or not hosts:
        return None
    planes = {p for host in hosts for p in nic_planes(plan, host).values()}
    bfd = plan.bfd
    backstop_ms = (min(bfd.interval_ms, bfd.host_echo_ms or bfd.interval_ms) * bfd.multiplier
                   if bfd else plan.hold * 1000)
    return schedule.timing(plan.probes, len(hosts), len(planes), backstop_ms)


def probe_config(lab: LabContext, node: NodePlan) -> dict[str, Any] | None:
    """The agent's probe engine: its argv, and each peer's GPU addresses its verdicts cover."""
    timing = probe_timing(lab.plan)
    if timing is None or timing.off:
        return None
    peers = [n for n in spraying_hosts(lab.plan) if n.name != node.name]
    argv = schedule.command(lab.runtime.program(probe.ENGINE), timing, str(node.loopback4),
                            nic_planes(lab.plan, node), [str(p.loopback4) for p in peers])
    return {"argv": argv, "peers": {str(p.loopback4): [str(a) for a in (p.loopback4, p.loopback6)
                                                       if a] for p in peers}}


def start_sprayer(lab: LabContext, node: NodePlan, bfd: dict[str, str]) -> None:
    """Start the host's agent detached; the runtime records it so destroy ends it. `bfd`:
    where it hears of BFD sessions, {"engine": feed} or {"bfdd": bfdd's control socket}."""
    workdir = lab.node_dir(node.name)
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / CONFIG_FILE
    config.write_text(json.dumps({"nics": nic_planes(lab.plan, node),
                                  "state_file": str(workdir / STATE_FILE), "bfd": bfd,
                                  "probe": probe_config(lab, node)}))
    (workdir / STATE_FILE).unlink(missing_ok=True)  # the new agent writes its own
    lab.runtime.spawn(node.name, lab.runtime.python("harness.spray.agent", str(config)),
                      workdir / LOG_FILE, f"{node.name}/sprayer")


def wait_sprayer(lab: LabContext, node: NodePlan, timeout: float) -> None:
    """Until the host's new agent has read the routes and applied them (it writes its state
    file then). Deploy attaches BFD only after: on 288 hosts the agents' first applies take
    both cores for a minute, and BFD's 300 ms detection started under that dropped sessions."""
    path = lab.node_dir(node.name) / STATE_FILE
    wait_until(path.exists, timeout, lambda _: LabError(
        f"{node.name}: its spray agent applied nothing within {timeout:.0f} s (see "
        f"{lab.node_dir(node.name) / LOG_FILE})"), every=WAIT_POLL_S)


@dataclass(frozen=True)
class SprayView:
    """One host's agent as seen from outside: alive?, its NICs, and planes per destination."""

    alive: bool
    nics: dict[str, int]
    spray: dict[str, list[int]]
    last_reaction_ms: float | None
    switched_ns: dict[str, tuple[int, int]]  # dst -> (event, nft switch), CLOCK_MONOTONIC
    bfd_down: frozenset[int]  # planes whose BFD session bfdd reports down
    drained: dict[str, dict[int, str]]  # address -> {plane: "silent" | "loss"}, by the probes
    routes: dict[str, list[int]]  # address -> planes zebra has a next hop on
    changes: int  # spray-set rewrites since the agent started (each restarts the round robin)

    def planes_to(self, address: str) -> set[int]:
        return set(self.spray.get(address, ()))


def read_spray(lab: LabContext, host: str) -> SprayView | None:
    try:
        state = json.loads((lab.node_dir(host) / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return SprayView(alive=lab.runtime.host_pid(host, state["pid"]) is not None,
                     nics=state["nics"],
                     spray=state["spray"], last_reaction_ms=state["last_reaction_ms"],
                     switched_ns={d: tuple(t) for d, t in state.get("switched_ns", {}).items()},
                     bfd_down=frozenset(state.get("bfd_down", ())),
                     drained={dst: {int(p): why for p, why in planes.items()}
                              for dst, planes in state.get("drained", {}).items()},
                     routes=state.get("routes", {}), changes=state["changes"])


def planes_to_hosts(lab: LabContext, host: str, view: SprayView | None = None
                    ) -> dict[str, set[int]]:
    """Other spraying host -> planes `host` sprays to its GPU address (IPv4 loopback);
    `view`: the host's state when it is already read."""
    view = view or read_spray(lab, host)
    spray = view.spray if view else {}
    return {n.name: set(spray.get(n.loopback4, ())) for n in spraying_hosts(lab.plan)
            if n.name != host}


def all_planes(lab: LabContext, host: str) -> set[int]:
    return set(nic_planes(lab.plan, lab.plan.node(host)).values())


def wait_spray(lab: LabContext, want: dict[tuple[str, str], set[int]] | None = None,
               timeout: float = 30.0) -> None:
    """Wait until (src, dst) -> planes holds for every pair in `want`; by default every
    spraying host sprays to every other on all of its planes. Each poll reads only the
    hosts that were still wrong (on 288 hosts a full read takes a core for a third of a
    second); once none is, one full read confirms all hold at once."""
    hosts = [n.name for n in spraying_hosts(lab.plan)]
    if want is None:
        want = {(a, b): all_planes(lab, a) for a in hosts for b in hosts if a != b}
    wanted = want
    pending: Collection[tuple[str, str]] = wanted

    def unmet(pairs: Collection[tuple[str, str]]) -> dict[tuple[str, str], set[int]]:
        seen = {src: planes_to_hosts(lab, src) for src in {s for s, _ in pairs}}
        return {pair: seen[pair[0]].get(pair[1], set()) for pair in pairs
                if seen[pair[0]].get(pair[1], set()) != wanted[pair]}

    def wrong() -> dict[tuple[str, str], set[int]]:
        nonlocal pending
        left = unmet(pending)
        if not left and pending is not wanted:
            left = unmet(wanted)
        pending = left or wanted
        return left

    def failure(left: dict[tuple[str, str], set[int]] | None) -> LabError:
        detail = "; ".join(f"{s}->{d}: planes {sorted(p)}, want {sorted(wanted[s, d])}"
                           for (s, d), p in sorted((left or {}).items())[:6])
        return LabError(f"lab {lab.plan.name}: spray sets not as expected after "
                        f"{timeout:.0f}s: {detail}")

    wait_until(wrong, timeout, failure, every=WAIT_POLL_S, until=none_left)


def format_planes(planes: set[int]) -> str:
    """{0, 1, 2, 4} -> '0-2,4'."""
    runs: list[list[int]] = []
    for p in sorted(planes):
        if runs and p == runs[-1][-1] + 1:
            runs[-1].append(p)
        else:
            runs.append([p])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs) or "none"


def why_out(view: SprayView, plane: int, addresses: list[str]) -> str:
    """Why `plane` is out towards these destinations, the most basic cause first: BFD took it
    out for all of them, or per destination zebra has no next hop on it or the probes drained
    it. Causes that differ between destinations are all named, with how many each explains (a
    gray plane whose BFD also flapped towards one host is still named a gray plane)."""
    if plane in view.bfd_down:
        return "BFD down"
    causes = Counter(
        "data-plane loss" if plane in view.routes.get(a, ()) and plane in view.drained.get(a, {})
        else "route gone" for a in addresses)
    if len(causes) == 1:
        return next(iter(causes))
    return ", ".join(f"{cause} ({causes[cause]} host{'s' * (causes[cause] > 1)})"
                     for cause in ("route gone", "data-plane loss"))


def spray_status(lab: LabContext, node: NodePlan) -> dict[str, Any]:
    """`inspect` columns of a spraying host: its plane NICs, the planes it sprays on, and
    why a plane is out: 'BFD down' (BFD took it out for every destination), 'data-plane loss'
    (peers' probes say it drops their packets) or 'route gone' (zebra has no next hop on it
    to some destinations: a failure further in the plane), or both of the last two with how
    many destinations each explains."""
    name = node.name
    nics = nic_planes(lab.plan, node)
    nic_text = f"{len(nics)}x{node.labels.get('nic-speed', '?')}"
    view = read_spray(lab, name)
    if view is None or not view.alive:
        return {"state": "degraded", "nics": nic_text, "planes": "sprayer down"}
    mine = set(nics.values())
    to_hosts = planes_to_hosts(lab, name, view)
    everywhere = set.intersection(mine, *to_hosts.values())
    text = f"{len(everywhere)}/{len(mine)} active: {format_planes(everywhere)}"
    loopback = {n.name: n.loopback4 for n in lab.plan.nodes}
    for plane in sorted(mine - everywhere):
        out = [loopback[host] for host, planes in to_hosts.items() if plane not in planes]
        reach = len(to_hosts) - len(out)
        where = f"to {reach}/{len(to_hosts)} hosts" if reach else "out"
        text += f"; plane {plane} {where}: {why_out(view, plane, out)}"
    return {"state": "running" if everywhere == mine else "degraded", "nics": nic_text,
            "planes": text}
