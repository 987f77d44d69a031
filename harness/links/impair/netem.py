"""The kernel backend: `tc netem` on the interface's root, under a `tbf` when a rate is set.

`replace` both creates and changes, so a live change never takes the interface down. With a
rate, tbf is the root and netem its child (serialise at the port, then propagate), the layout
the netem documentation gives for rate plus delay.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from harness.core.errors import LabError
from harness.links.impair.state import LinkState
from harness.topology.plan import Endpoint, Impairment

if TYPE_CHECKING:
    from harness.runtime.context import LabContext

# netem's default limit (1000 packets) silently drops at long delays: 50 ms at 100k pps is
# 5000 packets in flight. The userspace engine uses the same bound.
QUEUE_LIMIT = 50_000
TBF_LATENCY = "100ms"  # how long a packet may wait for tokens before tbf drops it


def _number(value: float) -> str:
    """Fixed-point without trailing zeros: tc does not parse exponents like 1e-05."""
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return text or "0"


def netem_args(impairment: Impairment) -> list[str]:
    args = ["netem", "limit", str(QUEUE_LIMIT)]
    if impairment.delay_us or impairment.jitter_us:
        args += ["delay", f"{_number(impairment.delay_us)}us"]
        if impairment.jitter_us:
            args.append(f"{_number(impairment.jitter_us)}us")
    if impairment.loss_pct:
        args += ["loss", f"{_number(impairment.loss_pct)}%"]
    if impairment.duplicate_pct:
        args += ["duplicate", f"{_number(impairment.duplicate_pct)}%"]
    return args


def tbf_burst_bytes(rate_bps: int, mtu: int) -> int:
    """1 ms of line rate, but never less than two full frames (tbf refuses a burst < MTU)."""
    return max(rate_bps // 8 // 1000, 2 * (mtu + 14))


def apply_argv(iface: str, impairment: Impairment, mtu: int) -> list[list[str]]:
    tc = ["tc", "qdisc", "replace", "dev", iface]
    if impairment.rate_bps is None:
        return [[*tc, "root", "handle", "1:", *netem_args(impairment)]]
    return [[*tc, "root", "handle", "1:", "tbf", "rate", f"{impairment.rate_bps}bit",
             "burst", str(tbf_burst_bytes(impairment.rate_bps, mtu)), "latency", TBF_LATENCY],
            [*tc, "parent", "1:1", "handle", "10:", *netem_args(impairment)]]


def clear_argv(iface: str) -> list[str]:
    return ["tc", "qdisc", "del", "dev", iface, "root"]


ROOT_HANDLE, NETEM_UNDER_TBF_HANDLE = "1:", "10:"


def qdisc_counters(qdisc_list: list[dict[str, Any]]) -> dict[str, int] | None:
    """The userspace engine's counters from `tc -s -j qdisc show dev IFACE` (parsed), or None
    when our qdiscs are not there. Qdiscs are found by the handles `apply_argv` gives them.
    tbf counts its child's drops as its own, so what tbf alone dropped (the rate) is the
    difference; netem does not count duplicates, so `rx` (frames offered) counts each
    duplicate once more."""
    qdiscs: dict[str, dict[str, Any]] = {q.get("handle"): q for q in qdisc_list}
    root = qdiscs.get(ROOT_HANDLE)
    if root is None or not root.get("root"):
        return None
    netem = qdiscs.get(NETEM_UNDER_TBF_HANDLE, root)
    queued = int(root["qlen"])
    return {"rx": root["packets"] + root["drops"] + queued, "tx": root["packets"],
            "lost": netem["drops"], "overlimit": root["drops"] - netem["drops"],
            "queued": queued}


def _run(lab: LabContext, node: str, argv: list[str]) -> None:
    out = lab.node(node).cmd(*argv)
    if out.returncode != 0:
        raise LabError(f"{node}: `{' '.join(argv)}` failed: {out.stderr.strip()}")


class NetemBackend:
    name = "netem"

    def apply(self, lab: LabContext, endpoint: Endpoint, impairment: Impairment,
              previous: LinkState | None) -> LinkState:
        mtu = next(i.mtu for i in lab.plan.node(endpoint.node).interfaces
                   if i.name == endpoint.iface)
        for argv in apply_argv(endpoint.iface, impairment, mtu):
            _run(lab, endpoint.node, argv)
        return LinkState(endpoint=endpoint, backend=self.name, impairment=impairment)

    def clear(self, lab: LabContext, state: LinkState) -> None:
        lab.node(state.endpoint.node).cmd(*clear_argv(state.endpoint.iface))  # gone is fine

    def health(self, lab: LabContext, state: LinkState) -> tuple[str, dict[str, int]]:
        node, iface = lab.node(state.endpoint.node), state.endpoint.iface
        out = node.cmd("tc", "-s", "-j", "qdisc", "show", "dev", iface)
        qdisc_list = json.loads(out.stdout) if out.returncode == 0 else []
        counters = qdisc_counters(qdisc_list)
        if counters is None or not any(q.get("kind") == "netem" for q in qdisc_list):
            return "broken: no netem qdisc", {}
        with node.netlink() as ip:
            (index,) = ip.link_lookup(ifname=iface)
            stats = ip.get_links(index)[0].get_attr("IFLA_STATS64")
        return "active", {**counters, "tx_errors": stats["tx_errors"]}
