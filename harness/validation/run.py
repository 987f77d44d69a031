"""Running a validation: ranks on the hosts of each tier (harness/traffic/rank.py), their
results gathered and turned into the figures nccl-tests prints.

Hosts are taken in an order that alternates between their groups (region, else building,
else the switch they hang off), so the first 2 or 8 of a tier span the fabric rather than
one rack. A collective's time is, per iteration, the slowest rank's, and the median of those.
With a transport (roce, metaroce) the ranks move their payloads as RDMA writes over fl-rdma
(harness/traffic/rdma_mesh.py) and keep TCP for their barriers only, so the point-to-point
bandwidth and the collectives are both the C transport's.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from itertools import zip_longest
from typing import TYPE_CHECKING, Any

from harness.core.errors import LabError
from harness.core.wait import none_left, wait_until
from harness.linux.processes import kill_and_reap
from harness.nodes.rdma.engine import ENGINE, Settings
from harness.topology.schema import Role
from harness.traffic.collective import COLLECTIVES
from harness.traffic.rdma import lab_nic, lab_rate_bps
from harness.validation.profile import Profile

if TYPE_CHECKING:
    from harness.runtime.context import LabContext

RANK_PORT = 7810
# a NIC with no bandwidth in the topology: fast enough that the engine's CPU is the limit
VALIDATE_NIC_BPS = 10_000_000_000


@dataclass(frozen=True)
class Pair:
    a: str
    b: str
    rtt_p50_us: float
    rtt_p99_us: float
    p2p_GBps: float  # nccl-tests reports GB/s: 1e9 bytes a second
    rtts_us: tuple[float, ...] = ()  # every round trip, sorted: the report's latency CDF


@dataclass(frozen=True)
class Row:
    tier: str  # as the profile names it: "2", "8", "all"
    hosts: int
    collective: str
    size: int  # bytes per rank, rounded to a multiple of n x 8 as the ranks ran it
    time_us: float
    algbw_GBps: float
    busbw_GBps: float
    ok: bool


@dataclass
class Validation:
    lab: str
    tiers: dict[str, list[str]]
    pairs: list[Pair] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    transport: str = "tcp"  # what carried the payloads: TCP sockets, or roce / metaroce

    @property
    def p2p_GBps(self) -> float:
        """The median pair's: what relative thresholds scale."""
        return statistics.median(p.p2p_GBps for p in self.pairs)

    def to_dict(self) -> dict[str, Any]:
        return {"lab": self.lab, "tiers": self.tiers, "transport": self.transport,
                "notes": self.notes,
                "p2p_GBps": self.p2p_GBps, "pairs": [asdict(p) for p in self.pairs],
                "collectives": [asdict(r) for r in self.rows]}


def group_of(lab: LabContext, host: str) -> str:
    node = lab.plan.node(host)
    return node.region or node.building or min(i.peer.node for i in node.interfaces)


def spread(lab: LabContext) -> list[str]:
    """The hosts, alternating between groups: host i and i+1 are in different ones."""
    groups: dict[str, list[str]] = {}
    for node in lab.plan.nodes:
        if node.role is Role.host and node.loopback4:
            groups.setdefault(group_of(lab, node.name), []).append(node.name)
    return [h for row in zip_longest(*groups.values()) for h in row if h is not None]


def tiers(profile: Profile, hosts: Sequence[str]) -> tuple[dict[str, list[str]], list[str]]:
    chosen: dict[str, list[str]] = {}
    notes = []
    for tier in profile.tiers:
        size = len(hosts) if tier == "all" else tier
        if size > len(hosts):
            notes.append(f"tier {tier} skipped: the lab has {len(hosts)} hosts")
        elif size not in map(len, chosen.values()):
            chosen[str(tier)] = list(hosts[:size])
    return chosen, notes


def rdma_spec(lab: LabContext, hosts: Sequence[str], transport: str) -> dict[str, Any]:
    """What a rank needs to start fl-rdma: the program, the settings, every host's NICs."""
    settings = Settings(transport=transport,
                        rate_bps=lab_rate_bps(lab, list(hosts)) or VALIDATE_NIC_BPS)
    return {"program": lab.runtime.program(ENGINE), "settings": asdict(settings),
            "nics": {h: asdict(lab_nic(lab, h, i + 1)) for i, h in enumerate(hosts)}}


def run_ranks(lab: LabContext, hosts: Sequence[str], spec: dict[str, Any],
              timeout: float, transport: str | None = None) -> dict[str, dict[str, Any]]:
    """One rank per host, all started before any is waited for; every result, or an error
    naming the rank that failed and how."""
    folder = lab.dir / "validation" / f"{time.monotonic_ns()}"
    folder.mkdir(parents=True)
    members = [{"name": h, "group": group_of(lab, h), "addr": lab.plan.node(h).loopback4}
               for h in hosts]
    if transport:
        spec = {**spec, "rdma": rdma_spec(lab, hosts, transport)}
    (folder / "spec.json").write_text(json.dumps(
        {**spec, "members": members, "port": RANK_PORT, "timeout": timeout}))
    runtime, pids = lab.runtime, {}
    try:
        for host in hosts:
            pids[host] = runtime.spawn(host, runtime.python(
                "harness.traffic.rank", str(folder / "spec.json"), host),
                folder / f"{host}.log", f"validation rank {host}")

        def pending() -> list[str]:
            done = {h for h in hosts if (folder / f"{h}.json").exists()}
            dead = [h for h in hosts if h not in done and runtime.host_pid(h, pids[h]) is None]
            if dead:
                raise LabError(f"validation rank on {dead[0]} died: "
                               f"{(folder / f'{dead[0]}.log').read_text()[-500:]}")
            return [h for h in hosts if h not in done]

        wait_until(pending, timeout, lambda left: LabError(
            f"validation ranks on {', '.join(left)} did not finish within {timeout:g}s "
            f"(logs in {folder})"), until=none_left)
    finally:
        kill_and_reap([p for h, pid in pids.items()
                       if (p := runtime.host_pid(h, pid)) is not None])
    results = {h: json.loads((folder / f"{h}.json").read_text()) for h in hosts}
    failed = {h: r["error"] for h, r in results.items() if "error" in r}
    if failed:
        raise LabError("validation ranks failed: " + "; ".join(
            f"{h}: {why}" for h, why in failed.items()))
    return results


def _pairs(order: Sequence[str], count: int) -> list[list[str]]:
    return [[order[i], order[(i + 1) % len(order)]] for i in range(min(count, len(order)))]


def point_to_point(lab: LabContext, profile: Profile, order: Sequence[str],
                   transport: str | None = None) -> list[Pair]:
    pairs = _pairs(order, profile.p2p.pairs)
    hosts = list(dict.fromkeys(h for pair in pairs for h in pair))
    results = run_ranks(lab, hosts, {"pairs": pairs, "pings": profile.p2p.pings,
                                     "stream_bytes": profile.p2p.stream, "tests": []},
                        profile.timeout_s, transport=transport)
    measured = []
    for result in results.values():
        for p in result["p2p"]:
            rtts = sorted(p["rtt_us"])
            measured.append(Pair(p["a"], p["b"], statistics.median(rtts),
                                 rtts[min(len(rtts) - 1, int(len(rtts) * 0.99))],
                                 p["stream_bytes"] / p["stream_seconds"] / 1e9,
                                 tuple(round(r, 1) for r in rtts)))
    return sorted(measured, key=lambda p: pairs.index([p.a, p.b]))


def collectives(lab: LabContext, profile: Profile, tier: str, hosts: Sequence[str],
                transport: str | None = None) -> list[Row]:
    tests = [{"collective": c, "size": size, "iterations": profile.iterations}
             for c in profile.collectives for size in profile.sizes]
    results = run_ranks(lab, hosts, {"pairs": [], "tests": tests}, profile.timeout_s,
                        transport=transport)
    rows, n = [], len(hosts)
    for index, test in enumerate(results[hosts[0]]["tests"]):
        per_rank = [results[h]["tests"][index] for h in hosts]
        seconds = statistics.median(map(max, zip(*(r["seconds"] for r in per_rank),
                                                 strict=True)))
        algbw = test["size"] / seconds / 1e9
        rows.append(Row(tier, n, test["collective"], test["size"], seconds * 1e6, algbw,
                        algbw * COLLECTIVES[test["collective"]].bus_factor(n),
                        all(r["ok"] for r in per_rank)))
    return rows


def validate(lab: LabContext, profile: Profile, transport: str | None = None) -> Validation:
    """Over TCP sockets, or with `transport` (roce, metaroce) over fl-rdma."""
    order = spread(lab)
    if len(order) < 2:
        raise LabError(f"lab {lab.plan.name} has {len(order)} host(s) with an IPv4 loopback; "
                       "validation needs 2 or more")
    chosen, notes = tiers(profile, order)
    result = Validation(lab.plan.name, chosen, notes=notes, transport=transport or "tcp")
    result.pairs = point_to_point(lab, profile, order, transport)
    for tier, hosts in chosen.items():
        result.rows += collectives(lab, profile, tier, hosts, transport)
    return result
