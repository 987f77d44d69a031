"""The lossless class's buffers, per port, sized from the cable the agent measured (SONiC's
BufferOrch). One ingress pool holds the switch's buffer (its capacity profile's); each
measured port gets a buffer profile whose XOFF threshold is the PFC headroom its cable needs
(harness/nodes/switch/sai/headroom.py) and its priority group LOSSLESS_PG pointing at it.
Measurements are kept in the node's directory (cable.json), so a warm restart puts the same
profiles back without measuring again; a new measurement moves a port's headroom with one SAI set.
A port whose lossless group the configuration declares (a lab with a `qos:` buffer) keeps that
group: the measurement sets its profile's XOFF_TH, which the port engine then applies
(harness/nodes/switch/sai/mmu.py): measure -> profile -> engine.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.linux.files import replace_file
from harness.nodes.switch.agent.cable import Measurement
from harness.nodes.switch.sai.api import SaiSwitch
from harness.nodes.switch.sai.headroom import EMULATED_RESPONSE_US, PFC_RESPONSE_US
from harness.nodes.switch.sai.records import IngressPriorityGroup
from harness.nodes.switch.sai.status import Status
from harness.nodes.switch.sai.types import NULL_OID, ObjectType

T = ObjectType
LOSSLESS_PG = 3  # RoCE's priority, as the lossless class's DSCP maps put it
STATE_FILE = "cable.json"


@dataclass
class BufferOrch:
    sai: SaiSwitch
    node_dir: Path
    pool: int | None = None
    profiles: dict[str, tuple[int, int]] = field(default_factory=dict)  # port -> profile, PG
    measured: dict[str, Measurement] = field(default_factory=dict)

    def restore(self, ports: dict[str, int]) -> None:
        """At boot: the profiles of the measurements a previous agent kept."""
        try:
            saved = json.loads((self.node_dir / STATE_FILE).read_text())
        except FileNotFoundError:
            return
        for entry in saved:
            measurement = Measurement(**entry)
            if measurement.port in ports:
                self.apply(measurement, ports[measurement.port], keep=False)
        self._keep()

    def apply(self, measurement: Measurement, port: int, *, keep: bool = True
              ) -> dict[str, Any]:
        """The port's headroom from `measurement`, in SAI; what was done, for the caller."""
        speed_mbps = self.sai.record(port).speed  # type: ignore[union-attr]
        declared = self._declared_profile(port)  # a port engine's: it answers as one
        headroom = measurement.headroom(speed_mbps * 1_000_000, PFC_RESPONSE_US if declared is
                                        None else EMULATED_RESPONSE_US)
        status = self._program(measurement.port, port, headroom.bytes, declared)
        if status.ok:
            self.measured[measurement.port] = measurement
            if keep:
                self._keep()
        return {**asdict(measurement), "km": round(headroom.km, 2), "speed_mbps": speed_mbps,
                "headroom_bytes": headroom.bytes, "status": str(status)}

    def _program(self, name: str, port: int, xoff: int, declared: int | None) -> Status:
        if declared is not None:  # the document's lossless group (a `qos:` buffer): its profile
            return self.sai.set(declared, "SAI_BUFFER_PROFILE_ATTR_XOFF_TH", xoff)
        if self.pool is None:
            status, pool = self.sai.create(T.BUFFER_POOL, {
                "SAI_BUFFER_POOL_ATTR_TYPE": "SAI_BUFFER_POOL_TYPE_INGRESS",
                "SAI_BUFFER_POOL_ATTR_SIZE": self.sai.capacity.buffer_bytes})
            if not status.ok:
                return status
            self.pool = pool  # type: ignore[assignment]
        if name in self.profiles:
            return self.sai.set(self.profiles[name][0], "SAI_BUFFER_PROFILE_ATTR_XOFF_TH", xoff)
        status, profile = self.sai.create(T.BUFFER_PROFILE, {
            "SAI_BUFFER_PROFILE_ATTR_POOL_ID": self.pool,
            "SAI_BUFFER_PROFILE_ATTR_THRESHOLD_MODE": "SAI_BUFFER_POOL_THRESHOLD_MODE_STATIC",
            "SAI_BUFFER_PROFILE_ATTR_XOFF_TH": xoff})
        if not status.ok:
            return status
        status, group = self.sai.create(T.INGRESS_PRIORITY_GROUP, {
            "SAI_INGRESS_PRIORITY_GROUP_ATTR_PORT": port,
            "SAI_INGRESS_PRIORITY_GROUP_ATTR_INDEX": LOSSLESS_PG,
            "SAI_INGRESS_PRIORITY_GROUP_ATTR_BUFFER_PROFILE": profile})
        if not status.ok:
            self.sai.remove(profile)  # type: ignore[arg-type]
            return status
        self.profiles[name] = (profile, group)  # type: ignore[assignment]
        return status

    def _declared_profile(self, port: int) -> int | None:
        """The buffer profile of a lossless priority group the configuration already gave
        `port`, if it has one and it is not this orchestrator's own."""
        own = {group for _, group in self.profiles.values()}
        for oid, group in self.sai.objects(T.INGRESS_PRIORITY_GROUP).items():
            if (isinstance(group, IngressPriorityGroup) and oid not in own
                    and group.port == port and group.index == LOSSLESS_PG
                    and group.buffer_profile != NULL_OID):
                return group.buffer_profile
        return None

    def _keep(self) -> None:
        replace_file(self.node_dir / STATE_FILE,
                     json.dumps([asdict(m) for m in self.measured.values()]))
