"""Faults at the SAI layer: make a given call fail at a rate, as a flaky ASIC SDK does.

A rule names an API (`create`, `remove`, `set`) and an object type (or `*`), a failure rate in
[0, 1] and the status to return. Draws come from a seeded generator, so a run is repeatable.
A failed call never reaches the backend: the switch state and the kernel stay consistent.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field

from harness.nodes.switch.sai.status import Status
from harness.nodes.switch.sai.types import ObjectType

APIS = ("create", "remove", "set")


@dataclass(frozen=True)
class FaultRule:
    api: str
    object_type: str  # ObjectType name or "*"
    rate: float
    status: Status = Status.FAILURE

    def matches(self, api: str, kind: ObjectType) -> bool:
        return self.api == api and self.object_type in ("*", kind.name)


@dataclass
class FaultPlan:
    rules: list[FaultRule] = field(default_factory=list)
    seed: int = 0
    injected: int = 0

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def add(self, api: str, object_type: str, rate: float,
            status: Status = Status.FAILURE) -> FaultRule:
        if api not in APIS:
            raise ValueError(f"api {api!r}: use one of {', '.join(APIS)}")
        if object_type != "*" and object_type not in ObjectType.__members__:
            raise ValueError(f"object type {object_type!r}: use * or one of "
                             f"{', '.join(ObjectType.__members__)}")
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate {rate}: use a fraction in [0, 1]")
        rule = FaultRule(api, object_type, rate, status)
        self.rules = [r for r in self.rules if (r.api, r.object_type) != (api, object_type)]
        if rate > 0:
            self.rules.append(rule)
        return rule

    def clear(self) -> None:
        self.rules.clear()

    def draw(self, api: str, kind: ObjectType) -> Status | None:
        """The status to fail this call with, or None to let it through."""
        for rule in self.rules:
            if rule.matches(api, kind) and self._rng.random() < rule.rate:
                self.injected += 1
                return rule.status
        return None

    def as_dict(self) -> dict[str, object]:
        return {"rules": [{**asdict(r), "status": str(r.status)} for r in self.rules],
                "injected": self.injected}
