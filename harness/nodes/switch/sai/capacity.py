"""Per-switch table sizes: a route table of N entries answers TABLE_FULL for entry N+1.

Real ASICs differ mostly in these numbers (a Tomahawk holds far fewer host routes than a
Jericho); a profile lets a lab give each switch its own, and a fault can shrink one at run
time to see what the control plane does when the FIB is full.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from harness.nodes.switch.sai.types import ObjectType
from harness.topology.platforms import Platform

T = ObjectType


@dataclass(frozen=True)
class CapacityProfile:
    name: str = "linux"
    routes: int = 1_000_000
    next_hops: int = 65_536
    next_hop_groups: int = 16_384
    next_hop_group_members: int = 131_072
    neighbors: int = 65_536
    my_sids: int = 16_384
    sid_lists: int = 16_384
    port_speed: int = 100_000  # Mb/s of a port the topology gives no `bandwidth`
    # Bytes of packet buffer: deep, as the chassis switches that carry long-haul lossless
    # traffic have (HBM); 400 km at 400G alone needs ~196 MB of PFC headroom per port.
    buffer_bytes: int = 8 << 30

    def limit(self, kind: ObjectType) -> int | None:
        field = _TABLE_OF.get(kind)
        return None if field is None else getattr(self, field)

    def shrunk(self, kind: ObjectType, size: int) -> CapacityProfile:
        field = _TABLE_OF.get(kind)
        if field is None:
            raise ValueError(f"{kind} has no table size; tables: {', '.join(TABLES)}")
        return replace(self, **{field: size}, name=f"{self.name}+{field}={size}")

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


_TABLE_OF = {T.ROUTE_ENTRY: "routes", T.NEXT_HOP: "next_hops", T.NEXT_HOP_GROUP: "next_hop_groups",
             T.NEXT_HOP_GROUP_MEMBER: "next_hop_group_members", T.NEIGHBOR_ENTRY: "neighbors",
             T.MY_SID_ENTRY: "my_sids", T.SRV6_SIDLIST: "sid_lists"}
TABLES = {field: kind for kind, field in _TABLE_OF.items()}


def platform_capacity(platform: Platform) -> CapacityProfile:
    """What an agent on this platform starts with: its tables, its ports' speed."""
    return replace(CapacityProfile(), name=platform.name, port_speed=platform.port_speed_mbps,
                   **platform.tables)
