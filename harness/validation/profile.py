"""A validation profile: what `labctl validate` measures and the thresholds it must meet.

As a cloud partner's acceptance suite: point-to-point latency and bandwidth between host pairs,
then collectives in tiers of hosts (2, 8, all), for message sizes from KB to MB. Thresholds on
shared cores are best relative: `relative_to: p2p_GBps` makes a bandwidth threshold a share of
the point-to-point bandwidth measured in the same run. Errors name the file, line and key.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from harness.core.errors import TopologyError, TopologyProblem
from harness.topology.loader import parse_yaml, schema_problems
from harness.topology.units import format_bytes, parse_bytes
from harness.traffic.collective import COLLECTIVES

DEFAULT = Path(__file__).with_name("default.yml")


def _size(value: object) -> int:
    if isinstance(value, int) and value > 0:
        return value
    return parse_bytes(value)


Size = Annotated[int, BeforeValidator(_size)]
Metric = Literal["rtt_p50_us", "rtt_p99_us", "p2p_GBps", "algbw_GBps", "busbw_GBps", "time_us"]
P2P_METRICS = ("rtt_p50_us", "rtt_p99_us", "p2p_GBps")
BANDWIDTHS = ("p2p_GBps", "algbw_GBps", "busbw_GBps")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PointToPoint(_Strict):
    pairs: int = Field(4, ge=1, description="host pairs measured, one at a time")
    pings: int = Field(200, ge=10, description="64-byte round trips per pair")
    stream: Size = Field(16 << 20, description="bytes streamed one way per pair")


class Check(_Strict):
    metric: Metric
    min: float | None = None
    max: float | None = None
    relative_to: Literal["p2p_GBps"] | None = None
    collective: str = "*"  # a name or a pattern, e.g. all_reduce:*
    size: Size | None = None  # default: every size measured
    tier: int | Literal["all"] | None = None  # default: every tier

    @model_validator(mode="after")
    def _one_bound(self) -> Check:
        if (self.min is None) == (self.max is None):
            raise ValueError("give one bound, min or max")
        if self.relative_to and self.metric not in BANDWIDTHS:
            raise ValueError(f"relative_to: p2p_GBps scales bandwidths, not {self.metric}")
        if not any(fnmatchcase(name, self.collective) for name in COLLECTIVES):
            raise ValueError(f"collective {self.collective!r} matches none of "
                             f"{', '.join(COLLECTIVES)}")
        return self

    def __str__(self) -> str:
        bound = f">= {self.min:g}" if self.min is not None else f"<= {self.max:g}"
        scale = f" x {self.relative_to}" if self.relative_to else ""
        scope = "" if self.metric in P2P_METRICS else f" of {self.collective}" + (
            f" at tier {self.tier}" if self.tier is not None else "") + (
            f" at {format_bytes(self.size)}" if self.size is not None else "")
        return f"{self.metric}{scope} {bound}{scale}"


def _known_collective(name: str) -> str:
    if name not in COLLECTIVES:
        raise ValueError(f"unknown collective {name!r}; known: {', '.join(COLLECTIVES)}")
    return name


class Profile(_Strict):
    tiers: list[Annotated[int, Field(ge=2)] | Literal["all"]] = [2, 8, "all"]
    sizes: list[Size] = [4 << 10, 64 << 10, 1 << 20]
    iterations: int = Field(5, ge=1, le=1000)
    collectives: list[Annotated[str, BeforeValidator(_known_collective)]] = list(COLLECTIVES)
    p2p: PointToPoint = PointToPoint()
    timeout_s: float = Field(60.0, gt=0, description="per tier, for every rank to finish")
    checks: list[Check] = []


def load_profile(path: str | Path = DEFAULT) -> Profile:
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise TopologyError([TopologyProblem(f"cannot read file: {exc}", file=str(path),
                                             fix="pass the path of a profile .yml")],
                            "validation profile") from None
    try:
        data, src = parse_yaml(text, str(path))
    except TopologyError as exc:
        raise TopologyError(exc.problems, "validation profile") from None
    try:
        return Profile.model_validate(data or {})
    except ValidationError as exc:
        raise TopologyError(schema_problems(exc, src, Profile), "validation profile") from None
