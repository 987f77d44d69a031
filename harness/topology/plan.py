"""The lab plan: everything deploy needs, fully resolved (addresses, ASNs, sessions).

The plan is the only thing the runtime reads. It is saved as `plan.json` in the lab directory
before any namespace exists, so `destroy` and `inspect` work even after a crashed deploy.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from harness.topology.binds import Bind
from harness.topology.schema import Damping, Kind, NodeBfd, Role
from harness.topology.units import format_duration_us, format_rate_bps


class _Plain(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Endpoint(_Plain):
    node: str
    iface: str

    def __str__(self) -> str:
        return f"{self.node}:{self.iface}"


class Lossless(_Plain):
    """A PFC class on the link (the userspace engine plays the far port's ingress queue; see
    fl_impair.c): XOFF threshold and headroom in bytes, the rate that port forwards the class
    at, and the class's DSCP (None: every frame)."""

    xoff: int
    headroom: int
    drain_bps: int
    dscp: int | None = None


class Impairment(_Plain):
    """What a link does to packets beyond forwarding them; all None means a clean link."""

    delay_us: float = 0.0
    jitter_us: float = 0.0
    loss_pct: float = 0.0
    duplicate_pct: float = 0.0
    rate_bps: int | None = None
    lossless: Lossless | None = None

    @property
    def is_clean(self) -> bool:
        return not (self.delay_us or self.jitter_us or self.loss_pct or self.duplicate_pct
                    or self.rate_bps or self.lossless)

    def describe(self) -> str:
        parts = [f"delay {format_duration_us(self.delay_us)}"]
        if self.jitter_us:
            parts.append(f"jitter {format_duration_us(self.jitter_us)}")
        if self.loss_pct:
            parts.append(f"loss {self.loss_pct:g}%")
        if self.duplicate_pct:
            parts.append(f"duplicate {self.duplicate_pct:g}%")
        if self.rate_bps:
            parts.append(f"rate {format_rate_bps(self.rate_bps)}")
        return ", ".join(parts)


class Interface(_Plain):
    """A link end; None addresses on a link to a node configured by the user (its config or
    `exec` addresses it, as in containerlab)."""

    name: str
    ipv4: str | None  # "10.1.0.0/31"
    ipv6: str | None  # "fd00:0:1::/127"
    mtu: int
    peer: Endpoint
    bandwidth_bps: int | None = None  # the port's speed (link `bandwidth`); None: the default


class LinkPlan(_Plain):
    a: Endpoint
    b: Endpoint
    mtu: int
    distance_km: float | None = None
    impairment: Impairment = Impairment()

    @property
    def name(self) -> str:
        return f"{self.a}--{self.b}"


class Session(_Plain):
    """One eBGP session as seen from `node`; each link yields one, between the link's IPv4
    addresses, and it carries IPv4 and IPv6 unicast (IPv6 routes come with the peer's
    link-local address as next hop, as FRR gives it). One session and one BFD session per
    link, not one per family: BFD's packets are what a big lab's idle CPU goes on."""

    node: str
    peer: str
    local_ip: str
    peer_ip: str
    local_asn: int
    peer_asn: int
    iface: str
    passive: bool = False  # waits for the peer to open the connection (augment.waits_for_peer)


class Sid(_Plain):
    """One of an SRv6 router's SIDs; End.X and End.DX* cross `iface` to `nexthop`."""

    sid: str
    behavior: str  # End, End.X, End.DT6, End.DT4, End.DT46, End.DX4, End.DX6
    iface: str | None = None
    nexthop: str | None = None


class PathPlan(_Plain):
    """A policy's path compiled: the SID list, the nodes it crosses (headend first), the
    headend's port towards the first, and the list its probes take (the same, ending at the
    tail's End.DT6 so the probe comes back to the headend by plain routing)."""

    segments: list[str]
    hops: list[str]
    iface: str
    probe: list[str]


class PolicyPlan(_Plain):
    name: str
    headend: str
    destination: str
    path: PathPlan
    fallback: PathPlan | None = None


class Srv6Plan(_Plain):
    probe_interval_us: int
    probe_misses: int
    probe_up: int
    hold_down_us: int
    policies: list[PolicyPlan] = []


class QosPlan(_Plain):
    """The lab's classes normalized from its vendor profiles (harness/topology/qos.py)."""

    profiles: list[str]
    dscp_to_tc: dict[int, int]
    tc_to_queue: dict[int, int]
    lossless_tc: int
    cnp_tc: int
    ecn: dict[str, int]  # the lossless class's marking: the earliest of its profiles'
    buffer: int | None = None  # the switches' shared buffer: congestion is real (fl-port)
    xoff: int | None = None  # a lossless group's static XOFF point; None: dynamic
    pfc: bool = True
    mark: bool = True  # the lossless queue marks CE by `ecn`
    watchdog_ms: tuple[int, int] | None = None  # PFC watchdog: detection, restoration


class NodePlan(_Plain):
    """A fabric node has a role, and its ASN, loopbacks and FRR config are planned here; a
    node without one is configured by the user (containerlab's way): `frr_config` is their
    file, applied as it is, `exec` addresses the links."""

    name: str
    role: Role | None
    kind: Kind
    asn: int | None = None
    router_id: str | None = None
    loopback4: str | None = None  # address only
    loopback6: str | None = None
    plane: int | None = None
    image: str | None = None
    group: str | None = None
    labels: dict[str, str] = {}
    exec: list[str] = []
    binds: list[Bind] = []
    env: dict[str, str] = {}
    sysctls: dict[str, str] = {}
    cmd: str | None = None
    frr_config: str | None = None
    daemons: list[str] | None = None  # None: the kind's own set
    interfaces: list[Interface] = []
    bfd: NodeBfd | None = None  # the node's own over the lab's (offload, multiplier)
    region: str | None = None
    building: str | None = None
    locator: str | None = None  # an SRv6 router's
    platform: str | None = None  # a SAI switch's hardware (harness/topology/platforms.py)
    sids: list[Sid] = []

    def bfd_multiplier(self, lab: BfdPlan) -> int:
        return self.bfd.multiplier if self.bfd and self.bfd.multiplier else lab.multiplier

    def bfd_offloaded(self, lab: BfdPlan) -> bool:
        """Sessions in the node's fl-bfd: as the lab says, unless the node says no; never on
        a node the user configures (its FRR is theirs)."""
        return lab.offload and not self.user_configured and not (
            self.bfd is not None and self.bfd.offload is False)

    @property
    def user_configured(self) -> bool:
        return self.role is None

    @property
    def runs_frr(self) -> bool:
        return self.kind in (Kind.frr, Kind.sai, Kind.host)

    @property
    def runs_own_frr(self) -> bool:
        """A user's FRR router (an FRR image or containerlab's kind frr)."""
        return self.user_configured and self.kind is Kind.frr


class BfdPlan(_Plain):
    interval_ms: int
    multiplier: int
    host_echo_ms: int | None = None
    offload: bool = True  # sessions in fl-bfd, not bfdd's packet loop (harness/nodes/bfd)


class ProbePlan(_Plain):
    """As the topology sets it; harness/spray/probe.py stretches it to the lab's size."""

    interval_us: int
    misses: int
    window_us: int
    drain_pct: float
    budget_pps: int


class LabPlan(_Plain):
    """`runtime` is the one the lab was deployed with; every command reopens it with that."""

    name: str
    source: str
    runtime: str = "netns"
    share_memory: bool | None = None  # decided when a Lab takes the plan (harness/linux/ksm.py)
    keepalive: int
    hold: int
    bfd: BfdPlan | None = None
    damping: Damping | None = None  # on the BAG switches (topology/schema.py says why there)
    probes: ProbePlan | None = None
    srv6: Srv6Plan | None = None
    qos: QosPlan | None = None
    nodes: list[NodePlan]
    links: list[LinkPlan]
    sessions: list[Session]
    notes: list[str] = []  # what deploy tells the user once: keys ignored, images mapped

    @property
    def topology_dir(self) -> Path:
        return Path(self.source).parent

    @cached_property
    def _nodes_by_name(self) -> dict[str, NodePlan]:
        return {n.name: n for n in self.nodes}

    @cached_property
    def _sessions_by_node(self) -> dict[str, list[Session]]:
        index: dict[str, list[Session]] = {n.name: [] for n in self.nodes}
        for s in self.sessions:
            index[s.node].append(s)
        return index

    @cached_property
    def link_ends(self) -> dict[Endpoint, LinkPlan]:
        return {end: link for link in self.links for end in (link.a, link.b)}

    def node(self, name: str) -> NodePlan:
        """Lookups go through indexes built once: big labs ask these per node and session."""
        return self._nodes_by_name[name]

    def sessions_of(self, node: str) -> list[Session]:
        return self._sessions_by_node.get(node, [])

    def link_at(self, endpoint: Endpoint) -> LinkPlan:
        return self.link_ends[endpoint]

    def peer_of(self, endpoint: Endpoint) -> Endpoint:
        """The far end of the link at `endpoint`."""
        link = self.link_at(endpoint)
        return link.b if link.a == endpoint else link.a

    def links_between_regions(self) -> list[LinkPlan]:
        """The long-haul links a BAG lab's regions meet over (what crossing BAG means)."""
        region = {n.name: n.region for n in self.nodes}
        return [link for link in self.links if region[link.a.node] and region[link.b.node]
                and region[link.a.node] != region[link.b.node]]

    def loopbacks(self) -> dict[str, tuple[str, str]]:
        """Fabric nodes' loopbacks (user-configured nodes have none planned)."""
        return {n.name: (n.loopback4, n.loopback6) for n in self.nodes
                if n.loopback4 and n.loopback6}
