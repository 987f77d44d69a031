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
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from harness.paths import LAB_NAME_MAX, LAB_NAME_PATTERN
from harness.topology.units import parse_duration_us, parse_percent, parse_rate_bps

DurationUs = Annotated[float, BeforeValidator(parse_duration_us)]
RateBps = Annotated[int, BeforeValidator(parse_rate_bps)]
Percent = Annotated[float, BeforeValidator(parse_percent)]


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
    backbone = "backbone"
    scaleup = "scaleup"


class Kind(StrEnum):
    """How a node is built: `frr` lets zebra program the kernel FIB directly; `sai` is a
    switch whose zebra feeds the SAI agent over FPM (harness/nodes/switch.py)."""

    frr = "frr"
    sai = "sai"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=False)


class NodeSpec(_Strict):
    """One node; `defaults` and `kinds` entries use the same keys."""

    kind: Kind | None = None
    image: str | None = Field(None, description="container image (docker runtime only)")
    labels: dict[str, Text] = {}
    group: str | None = None
    exec: list[str] = Field([], description="commands run inside the node after deploy")
    role: Role | None = None
    plane: int | None = Field(None, ge=0, le=63)
    asn: int | None = Field(None, ge=1, le=4_294_967_294)
    loopback4: IPv4Address | None = None
    loopback6: IPv6Address | None = None


class LinkSpec(_Strict):
    endpoints: list[str] = Field(min_length=2, max_length=2)
    mtu: int | None = Field(None, ge=1280, le=65535)
    distance_km: float | None = Field(None, ge=0, le=40_000)
    delay: DurationUs | None = None
    jitter: DurationUs | None = None
    loss: Percent | None = None
    duplicate: Percent | None = None
    rate: RateBps | None = None


class TopologySpec(_Strict):
    defaults: NodeSpec = NodeSpec()
    kinds: dict[Kind, NodeSpec] = {}
    nodes: dict[str, NodeSpec] = Field(min_length=1)
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


class BgpSettings(_Strict):
    """eBGP on every link (RFC 7938); timers are short because labs are for failing."""

    asn_base: int = Field(4_200_000_000, ge=1, le=4_294_000_000)
    keepalive: int = Field(3, ge=1, le=60)
    hold: int = Field(9, ge=3, le=180)
    bfd: Bfd | None = None


class TopologyFile(_Strict):
    name: str = Field(pattern=LAB_NAME_PATTERN, max_length=LAB_NAME_MAX)
    addressing: Addressing = Addressing()
    bgp: BgpSettings = BgpSettings()
    topology: TopologySpec
