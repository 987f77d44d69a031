"""Fault results for nightly charts: which fault, how long traffic suffered, how much was lost.

A flow measures a fault when the fault was injected (or undone: "undo plane_down(3)" is a
plane coming back) while the flow ran. Results go to the
test's JUnit properties (`<fault>.outage_ms`, `<fault>.lost`, ...) and to a JSON file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.faults import Fault
from harness.traffic.analysis import FlowResult


def fault_records(test: str, faults: Iterable[Fault], flows: Iterable[FlowResult],
                  outcome: str) -> list[dict[str, Any]]:
    flows = list(flows)
    records = []
    events = [(str(f), f.injected_ns) for f in faults]
    events += [(f"undo {f}", f.undone_ns) for f in faults if f.undone_ns is not None]
    for label, at_ns in events:
        for flow in (f for f in flows if f.covers(at_ns)):
            records.append({
                "test": test, "fault": label, "flow": f"{flow.src}->{flow.dst}",
                "outage_ms": flow.outage_ms, "lost": flow.lost, "sent": flow.sent,
                "rate_pps": flow.rate_pps, "reordered": flow.reordered,
                "latency_p99_us": flow.latency_us["p99"], "outcome": outcome})
    return records


def junit_properties(records: Iterable[dict[str, Any]]) -> list[tuple[str, Any]]:
    properties = []
    for r in records:
        key = f"{r['fault']} {r['flow']}"
        properties += [(f"{key}.outage_ms", r["outage_ms"]), (f"{key}.lost", r["lost"]),
                       (f"{key}.sent", r["sent"])]
    return properties


def write_report(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"results": records}, indent=1) + "\n")
