"""The topology file as the user writes it: containerlab's shape plus fabric-lab's keys.

```yaml
name: clos
topology:
  defaults: {kind: frr}
  kinds: {frr: {}}
  nodes:
    spine1: {role: spine}
    leaf1: {role: leaf}
  links:
    - endpoints: ["leaf1:eth1", "spine1:eth1"]
      distance_km: 2
```

Every model forbids unknown keys, so a typo is an error instead of a silently ignored line.
Values with units are parsed here, so a bad unit is reported at its own key.
"""

from __future__ import annotations

from enum import StrEnum
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    create_model,
    model_validator,
)

from harness.core.paths import LAB_NAME_MAX, LAB_NAME_PATTERN
from harness.topology.units import parse_bytes, parse_duration_us, parse_percent, parse_rate_bps

DurationUs = Annotated[float, BeforeValidator(parse_duration_us)]
RateBps = Annotated[int, BeforeValidator(parse_rate_bps)]
Percent = Annotated[float, BeforeValidator(parse_percent)]
Bytes = Annotated[int, BeforeValidator(parse_bytes)]


def _as_text(value: object) -> object:
    """A label is text, as in containerlab: `rack: 3` means "3", `on: true` means "true"."""
    if isinstance(value, bool):
        return str(value).lower()
    return str(value) if isinstance(value, int | float) else value


Text = Annotated[str, BeforeValidator(_as_text)]


class Role(StrEnum):
    """Where a node sits in the fabric; the ASN plan and the graph layout follow from it."""

    host = "host"
    leaf = "leaf"
    spine = "spine"
    superspine = "superspine"
    bag = "bag"  # backend aggregation: joins a region's building fabrics and the regions
    backbone = "backbone"
    scaleup = "scaleup"


class Kind(StrEnum):
    """How a node is built: `frr` lets zebra program the kernel FIB directly; `sai` is a
    switch whose zebra feeds the SAI agent over FPM (harness/nodes/switch/kind.py); `host` is
    a GPU host whose NICs reach several planes, FRR plus the spraying NIC (harness/spray),
    which augment makes of every such host; `linux` is containerlab's plain node (an FRR
    image makes it an FRR router with the lab's own config); `bridge` is a Linux bridge
    joining the links that end on it."""

    frr = "frr"
    sai = "sai"
    host = "host"
    linux = "linux"
    bridge = "bridge"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=False,
                              populate_by_name=True)


# containerlab node keys that change nothing on a runtime without a management network,
# container engine options or vendor NOSes; accepted and reported on deploy as ignored.
IGNORED_NODE_KEYS = {
    "mgmt-ipv4": "no management network: nodes are reached with `labctl exec`",
    "mgmt-ipv6": "no management network: nodes are reached with `labctl exec`",
    "ports": "no management network to publish ports on",
    "publish": "no management network to publish ports on",
    "network-mode": "nodes have only the lab's links",
    "dns": "nodes use the host's resolver",
    "type": "no vendor NOS variants here",
    "license": "no licensed NOS here",
    "memory": "no per-node resource limits",
    "cpu": "no per-node resource limits",
    "cpu-set": "no per-node resource limits",
    "shm-size": "no per-node resource limits",
    "user": "node processes run as the image's or host's user",
    "entrypoint": "nodes run what their kind starts plus `cmd`",
    "image-pull-policy": "no registry: images are built locally",
    "restart-policy": "a crashed node is restarted by `labctl fault`, not the engine",
    "auto-remove": "`labctl destroy` removes every node",
    "startup-delay": "nodes start together; convergence is waited for",
    "stages": "deploy runs its own stages",
    "wait-for": "deploy runs its own stages",
    "enforce-startup-config": "a given startup-config is always used as it is",
    "suppress-startup-config": "no generated config is pushed to kind linux nodes",
    "aliases": "nodes have no management network names",
    "certificate": "no TLS services in nodes",
    "healthcheck": "deploy waits for daemons and neighbours instead",
    "devices": "nodes see the host's devices they need",
    "cap-add": "nodes get the capabilities FRR and the agents need",
    "sandbox": "no VM sandboxes",
    "kernel": "no VM kernels",
    "runtime": "the runtime is chosen with `deploy --runtime`",
    "env-files": "use `env`",
    "components": "no chassis components",
    "config": "no config dispatcher",
    "position": "graph positions come from roles",
}


def _ignored_fields() -> dict[str, Any]:
    return {key.replace("-", "_"): (Any, Field(None, alias=key)) for key in IGNORED_NODE_KEYS}


class FrrExtras(_Strict):
    daemons: list[str] | None = Field(None, description="daemons to start besides zebra")


class Extras(_Strict):
    frr: FrrExtras | None = None


class NodeBfd(_Strict):
    """A node's own BFD over the lab's `bgp.bfd`: a switch whose ASIC cannot run BFD (its
    sessions stay in bfdd's own loop), or a platform's own detection multiplier."""

    offload: bool | None = Field(None, description="false: this node's sessions run in bfdd")
    multiplier: int | None = Field(None, ge=2, le=255)


class NodeFields(_Strict):
    """One node; `defaults`, `kinds` and `groups` entries use the same keys."""

    kind: Kind | None = None
    image: str | None = None
    labels: dict[str, Text] = {}
    group: str | None = None
    exec: list[str] = Field([], description="commands run inside the node after deploy")
    binds: list[str] = Field([], description="SRC:DST[:ro], SRC relative to the topology file")
    env: dict[str, Text] = {}
    sysctls: dict[str, Text] = {}
    cmd: str | None = Field(None, description="a long-running command the node runs")
    startup_config: str | None = Field(None, alias="startup-config")
    extras: Extras | None = None
    role: Role | None = None
    plane: int | None = Field(None, ge=0, le=63)
    asn: int | None = Field(None, ge=1, le=4_294_967_294)
    loopback4: IPv4Address | None = None
    loopback6: IPv6Address | None = None
    bfd: NodeBfd | None = None
    region: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
                               description="where the node stands: shared ASNs are scoped "
                               "by it (a region's BAG switches share one)")
    building: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
                                 description="within its region: a building's spines and "
                                 "super-spines share ASNs only with each other")
    locator: IPv6Network | None = Field(None, description="an SRv6 router's own locator "
                                        "(default: the next from srv6.locators)")
    platform: str | None = Field(None, description="a kind sai switch's hardware: its ports, "
                                 "ASIC and SAI capacities (harness/topology/platforms.py)")


# The node model proper: NodeFields plus containerlab's ignored keys, each under its own name.
NodeSpec: type[NodeFields] = create_model("NodeSpec", __base__=NodeFields, **_ignored_fields())


def _endpoint_text(value: object) -> object:
    """containerlab's extended link form `{node: a, interface: eth1}` as "a:eth1"."""
    if isinstance(value, dict) and set(value) <= {"node", "interface", "mac"}:
        return f"{value.get('node', '')}:{value.get('interface', '')}"
    return value


class LinkSpec(_Strict):
    endpoints: list[Annotated[str, BeforeValidator(_endpoint_text)]] = Field(
        min_length=2, max_length=2)
    type: Literal["veth"] | None = None
    labels: dict[str, Text] = {}
    vars: dict[str, Any] = {}
    mtu: int | None = Field(None, ge=68, le=65535)
    distance_km: float | None = Field(None, ge=0, le=40_000)
    delay: DurationUs | None = None
    jitter: DurationUs | None = None
    loss: Percent | None = None
    duplicate: Percent | None = None
    rate: RateBps | None = None
    bandwidth: RateBps | None = Field(
        None, ge=1_000_000, description="the speed both ends' ports run at, as a SAI switch's "
        "SAI_PORT_ATTR_SPEED (default: the switch's profile); it shapes nothing, `rate` does")


class TopologySpec(_Strict):
    defaults: NodeSpec = NodeSpec()  # type: ignore[valid-type]
    kinds: dict[Kind, NodeSpec] = {}  # type: ignore[valid-type]
    groups: dict[str, NodeSpec] = {}  # type: ignore[valid-type]
    nodes: dict[str, NodeSpec] = Field(min_length=1)  # type: ignore[valid-type]
    links: list[LinkSpec] = []


class Addressing(_Strict):
    """Pools the augment stage carves loopbacks (/32, /128) and point-to-point links from."""

    loopback4: IPv4Network = IPv4Network("10.0.0.0/16")
    loopback6: IPv6Network = IPv6Network("fd00:0:0:1::/64")
    p2p4: IPv4Network = IPv4Network("10.1.0.0/16")
    p2p6: IPv6Network = IPv6Network("fd00:0:1::/48")


class Bfd(_Strict):
    interval: DurationUs = 100_000.0
    multiplier: int = Field(3, ge=2, le=255)
    host_echo: DurationUs | None = Field(
        None, description="BFD echo interval on host-leaf sessions: the host checks its leaf's "
        "forwarding path every so often and gives up after `multiplier` misses")
    offload: bool = Field(
        True, description="run the sessions in each node's BFD offload (fl-bfd: one wake-up "
        "per tick for all sessions) rather than in bfdd's own packet loop (a wake-up per packet)")
    budget_pps: int = Field(
        20_000, ge=100, description="control packets a second of the whole lab at most: a "
        "bigger lab's sessions send less often and find a failure as much later (printed at "
        "deploy; echo keeps its own interval)")


class Damping(_Strict):
    """Route-flap damping (RFC 2439) on the BAG switches, where the long-haul sessions end:
    each flap of a route adds 1000 to its penalty, which halves every `half_life`; past
    `suppress` the route is not used or passed on until the penalty decays below `reuse`, and
    never longer than `max_suppress`. The defaults are RFC 2439's. RFC 7196 raises suppress to
    6000 for Internet routes, whose updates churn with path exploration; in this fabric (one
    session per link, under BFD) a withdrawal means a link went down, and the third within a
    half-life marks it flapping. FRR 8.4 damps per address family, not per session: on a BAG
    switch, all it learns."""

    half_life: int = Field(15, ge=1, le=45, description="minutes")
    reuse: int = Field(750, ge=1, le=20_000)
    suppress: int = Field(2000, ge=1, le=20_000)
    max_suppress: int = Field(60, ge=1, le=255, description="minutes")

    @model_validator(mode="after")
    def _suppress_above_reuse(self) -> Damping:
        if self.suppress <= self.reuse:
            raise ValueError(f"suppress ({self.suppress}) must be above reuse ({self.reuse})")
        return self


class BgpSettings(_Strict):
    """eBGP on every link (RFC 7938); timers are short because labs are for failing."""

    asn_base: int = Field(4_200_000_000, ge=1, le=4_294_000_000)
    keepalive: int | None = Field(
        None, ge=1, le=60, description="seconds; unset: 3, or longer on a lab with BFD that "
        "would otherwise send more than `keepalive_budget` a second (harness/topology/"
        "bgp_timers.py)")
    hold: int | None = Field(None, ge=3, le=180, description="seconds; unset: three keepalives")
    keepalive_budget: int = Field(
        200, ge=10, description="keepalives per second of the whole lab at most while BFD "
        "watches every session: a bigger lab sends them less often (printed at deploy)")
    bfd: Bfd | None = None
    damping: Damping | None = Field(None, description="route-flap damping on BAG switches")


class Probes(_Strict):
    """The host NIC's data-plane path check on multi-plane hosts (harness/spray/probe.py)."""

    interval: DurationUs = Field(
        5_000.0, description="a probe to every peer host on every plane this often (a round)")
    misses: int = Field(3, ge=2, le=100, description="a plane is silent once this many newer "
                        "rounds arrived on other planes")
    window: DurationUs = Field(1_000_000.0, description="loss is counted over this long")
    drain_loss: Percent = Field(
        2.5, gt=0, le=100, description="a plane losing this share of the window's probes to a "
        "peer more than the typical plane does is drained towards that peer; twice as many "
        "lost across all peers drains it towards every destination")
    budget_pps: int = Field(
        20_000, ge=100, description="probes per second of the whole lab at most: a bigger lab "
        "probes less often (printed at deploy)")


class Spray(_Strict):
    probes: Probes | None = Field(Probes(), description="null: BFD and BGP alone take a plane out")


class Srv6Policy(_Strict):
    """A TE policy: traffic for `destination` entering at `headend` is encapsulated with the
    SID list of `path`, and of `fallback` while `path` is broken (harness/topology/srv6.py
    says how a path compiles)."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$")
    headend: str
    destination: IPv4Network | IPv6Network
    path: list[str] = Field(min_length=1, description="node names (each linked to the one "
                            "before it, the first to the headend) or SIDs")
    fallback: list[str] | None = Field(None, min_length=1, description="the same, used while "
                                       "the headend's probes find `path` broken")


class Srv6(_Strict):
    """SRv6 on the backbone routers (role backbone, kind sai): a locator each, its End, End.DT6,
    End.DT4, End.DT46 and End.X SIDs (End.DX4/End.DX6 towards neighbours outside the
    backbone), and the TE policies. Locators are carried by BGP (IPv6 unicast), which FRR 8.4
    has; it has no static SIDs, so the SIDs reach the switches through the agent's
    configuration channel."""

    locators: IPv6Network = Field(IPv6Network("fcbb:bbbb::/32"),
                                  description="the pool each router's locator comes from")
    locator_length: int = Field(48, ge=16, le=64)
    probe_interval: DurationUs = Field(10_000.0, description="each policy's path is probed "
                                       "this often by its headend")
    probe_misses: int = Field(3, ge=1, le=100, description="probe intervals in a row with "
                              "none back that make a path broken")
    probe_up: int = Field(3, ge=1, le=100, description="probes back in a row (consecutive "
                          "sequence numbers) that make a broken path usable again")
    hold_down: DurationUs = Field(500_000.0, description="a path that broke is not used again "
                                  "before this long after: a flapping path cannot swing its "
                                  "policy faster")
    policies: list[Srv6Policy] = []


class QosClass(_Strict):
    tc: int = Field(ge=1, le=7, description="its traffic class on every switch")
    queue: int = Field(ge=1, le=7, description="its queue on every port")


class Ecn(_Strict):
    min_bytes: int = Field(ge=1, description="queue depth where marking starts")
    max_bytes: int = Field(ge=1, description="queue depth where marking reaches probability")
    probability: int = Field(ge=1, le=100, description="percent marked at max_bytes")

    @model_validator(mode="after")
    def _ordered(self) -> Ecn:
        if self.min_bytes >= self.max_bytes:
            raise ValueError("ecn.min_bytes must be below ecn.max_bytes")
        return self


class PfcWatchdog(_Strict):
    detect_ms: int = Field(200, ge=10, le=60_000, description="a queue paused this long, "
                           "with frames waiting, is in a PFC storm")
    restore_ms: int = Field(400, ge=10, le=60_000, description="no PAUSE for this long ends it")


class Qos(_Strict):
    """One lossless RDMA class across vendors (harness/topology/qos.py): the switches honour
    the RoCEv2 and CNP markings of every listed vendor profile. With a `buffer`, congestion
    is real: ports drain at their speed through queues in that shared buffer, the lossless
    class pauses with 802.1Qbb PFC and marks ECN (harness/nodes/port)."""

    profiles: list[str] = Field(min_length=1, description="vendor QoS profiles: a shipped "
                                "name (harness/topology/qos_profiles/) or a YAML file beside "
                                "the topology")
    lossless: QosClass = QosClass(tc=3, queue=3)
    cnp: QosClass = QosClass(tc=6, queue=6)
    buffer: Bytes | None = Field(None, ge=16_384, description="each switch's shared buffer; "
                                 "ports then drain at their speed (a link's `bandwidth`)")
    xoff: Bytes | None = Field(None, ge=1, description="a lossless priority group's bytes "
                               "before it sends PAUSE (default: SAI's dynamic threshold, the "
                               "free buffer)")
    pfc: bool = Field(True, description="the lossless class pauses rather than drops")
    ecn: bool | Ecn = Field(True, description="the lossless queue marks CE: true by the "
                            "profiles' thresholds (real ASICs' bytes), or these (for a lab's "
                            "emulated line rate), false not at all")
    watchdog: PfcWatchdog | None = None

    @model_validator(mode="after")
    def _apart(self) -> Qos:
        if self.lossless.tc == self.cnp.tc or self.lossless.queue == self.cnp.queue:
            raise ValueError("the lossless class and the CNP class need a traffic class and "
                             "a queue each")
        return self


class TopologyFile(_Strict):
    name: str = Field(pattern=LAB_NAME_PATTERN, max_length=LAB_NAME_MAX)
    prefix: str | None = Field(None, description="containerlab's container name prefix")
    mgmt: dict[str, Any] | None = Field(None, description="containerlab's management network")
    addressing: Addressing = Addressing()
    bgp: BgpSettings = BgpSettings()
    spray: Spray = Spray()
    srv6: Srv6 | None = None
    qos: Qos | None = None
    topology: TopologySpec
