"""An in-memory backend for unit tests: it programs nothing and remembers every call.

`programmed` mirrors what a real ASIC would hold (ref -> record), `calls` lists (api, ref) in
order, and `refuse` makes the backend itself fail a call, to test the switch's rollback.
"""

from __future__ import annotations

from harness.nodes.switch.sai.backend import Discovery, ObjectView, Op, Ref
from harness.nodes.switch.sai.records import Port, Record
from harness.nodes.switch.sai.status import Status


class FakeBackend:
    name = "fake"

    def __init__(self, discovery: Discovery | None = None) -> None:
        self.programmed: dict[Ref, Record] = {}
        self.calls: list[tuple[str, Ref]] = []
        self.refuse: set[str] = set()
        self.stats: dict[tuple[int, ...], dict[str, int]] = {}
        self.discovery = discovery or Discovery()
        self.adopted: dict[Ref, int] = {}
        self.view: ObjectView | None = None

    def bind(self, view: ObjectView) -> None:
        self.view = view

    def apply(self, ops: list[Op]) -> list[Status]:
        statuses = []
        for op in ops:
            self.calls.append((op.api, op.ref))
            if op.api in self.refuse:
                statuses.append(Status.FAILURE)
                continue
            if op.new is None:
                del self.programmed[op.ref]
            else:
                self.programmed[op.ref] = op.new
            statuses.append(Status.SUCCESS)
        return statuses

    def port_stats(self, port: Port) -> dict[str, int]:
        return dict(self.stats.get(port.hw_lane_list, {}))

    def queue_stats(self, port: Port) -> list[dict[str, int]]:
        return []

    def discover(self) -> Discovery:
        return self.discovery

    def adopt(self, ref: Ref, handle: int) -> None:
        self.adopted[ref] = handle
        record = self.view.record(ref) if self.view else None
        if record is not None:
            self.programmed[ref] = record
