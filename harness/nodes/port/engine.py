"""fl-port (fl_port.c): its program, its control socket, and its counters as SAI names them.

One engine serves a node: a switch's every port (switch mode, programmed from SAI objects by
harness/nodes/switch/sai/mmu.py) or a host's NIC (nic mode, harness/nodes/port/nic.py). Its
counters come back as text, one line per pool, port, queue and priority group; `Counters` is
that text parsed, with the SAI statistic names `labctl sai NODE counters` prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.linux.detached import DetachedEngine

ENGINE = "fl-port"
QUEUES = 8

QUEUE_STATS = {"packets": "SAI_QUEUE_STAT_PACKETS", "bytes": "SAI_QUEUE_STAT_BYTES",
               "dropped": "SAI_QUEUE_STAT_DROPPED_PACKETS",
               "dropped_bytes": "SAI_QUEUE_STAT_DROPPED_BYTES",
               "depth": "SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES",
               "watermark": "SAI_QUEUE_STAT_WATERMARK_BYTES",
               "ecn_marked": "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS",
               "wred_dropped": "SAI_QUEUE_STAT_WRED_DROPPED_PACKETS",
               # SONiC's PFC watchdog counters (no SAI statistic names them)
               "wd_detected": "PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED",
               "wd_restored": "PFC_WD_QUEUE_STATS_DEADLOCK_RESTORED",
               "wd_dropped": "PFC_WD_QUEUE_STATS_TX_DROPPED_PACKETS"}
GROUP_STATS = {"packets": "SAI_INGRESS_PRIORITY_GROUP_STAT_PACKETS",
               "bytes": "SAI_INGRESS_PRIORITY_GROUP_STAT_BYTES",
               "occupancy": "SAI_INGRESS_PRIORITY_GROUP_STAT_CURR_OCCUPANCY_BYTES",
               "watermark": "SAI_INGRESS_PRIORITY_GROUP_STAT_WATERMARK_BYTES",
               "headroom": "SAI_INGRESS_PRIORITY_GROUP_STAT_XOFF_ROOM_CURR_OCCUPANCY_BYTES",
               "headroom_watermark":
                   "SAI_INGRESS_PRIORITY_GROUP_STAT_XOFF_ROOM_WATERMARK_BYTES",
               "dropped": "SAI_INGRESS_PRIORITY_GROUP_STAT_DROPPED_PACKETS",
               # the lab's own (fl_port.c): admitted past XOFF_TH, beyond what the port's
               # pause window holds: an engine's lateness, not the cable's
               "late_packets": "FL_PG_STAT_LATE_PAUSE_ADMITTED_PACKETS",
               "late_bytes": "FL_PG_STAT_LATE_PAUSE_ADMITTED_BYTES"}


@dataclass
class Queue:
    stats: dict[str, int]
    paused_us: int = 0
    storm: bool = False
    hist: list[tuple[int, int]] = field(default_factory=list)  # (marked, seen) per bucket


@dataclass
class Group:
    stats: dict[str, int]
    pausing: bool
    pfc_rx: int
    pfc_tx: int


@dataclass
class PortCounters:
    name: str
    speed_bps: int
    tx: int
    queues: list[Queue] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)

    def sai(self) -> dict[str, int]:
        """The port's PFC statistics as SAI names them, per priority."""
        out: dict[str, int] = {}
        for prio, group in enumerate(self.groups):
            out[f"SAI_PORT_STAT_PFC_{prio}_RX_PKTS"] = group.pfc_rx
            out[f"SAI_PORT_STAT_PFC_{prio}_TX_PKTS"] = group.pfc_tx
        return out


@dataclass
class Counters:
    pool: dict[str, int]
    ports: dict[int, PortCounters]

    @property
    def names(self) -> set[str]:
        return {p.name for p in self.ports.values()}

    def port(self, name: str) -> PortCounters:
        return next(p for p in self.ports.values() if p.name == name)


def class_maps(dscp_to_tc: dict[int, int], tc_to_queue: dict[int, int]) -> str:
    """A port's maps as the engine's `port` command takes them: a DSCP the first map does
    not name is TC 0, a TC the second does not name goes to the queue of its number."""
    return (f"dscp_tc={''.join(str(dscp_to_tc.get(d, 0)) for d in range(64))} "
            f"tc_queue={''.join(str(tc_to_queue.get(t, t)) for t in range(QUEUES))}")


def _pairs(words: list[str]) -> dict[str, str]:
    return dict(word.split("=", 1) for word in words)


def parse(text: str) -> Counters:
    pool: dict[str, int] = {}
    ports: dict[int, PortCounters] = {}
    for line in text.splitlines():
        kind, *words = line.split()
        if kind == "pool":
            pool = {k: int(v) for k, v in _pairs(words).items()}
        elif kind == "port":
            values = _pairs(words[1:])
            ports[int(words[0])] = PortCounters(values["name"], int(values["speed_bps"]),
                                                int(values["tx"]))
        elif kind == "queue":
            values = _pairs(words[2:])
            hist = [tuple(map(int, b.split("/"))) for b in values.pop("hist", "").split(",") if b]
            ports[int(words[0])].queues.append(Queue(
                {name: int(values[key]) for key, name in QUEUE_STATS.items()},
                int(values["paused_us"]), values["storm"] == "1", hist))  # type: ignore[arg-type]
        elif kind == "pg":
            values = _pairs(words[2:])
            ports[int(words[0])].groups.append(Group(
                {name: int(values[key]) for key, name in GROUP_STATS.items()},
                values["pausing"] == "1", int(values["pfc_rx"]), int(values["pfc_tx"])))
    return Counters(pool, ports)


class PortEngine(DetachedEngine):
    """A node's fl-port, reached on `directory/port.sock`."""

    def __init__(self, directory: Path, name: str = "port", what: str = "port engine") -> None:
        super().__init__(directory / f"{name}.sock", directory / f"{name}.log")
        self.what = what

    def counters(self) -> Counters:
        return parse(self.request("stats"))

    def events(self) -> list[str]:
        return self.request("events").splitlines()
