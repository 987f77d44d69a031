"""An emulated switch platform, in the areas OCP's OSPA splits a platform into: power (PSUs),
thermal (sensors, fans and the policy that drives them), inventory (serials, the optic in each
port), out-of-band (management port, console, LEDs), firmware and diagnostics.

The state is plain data (saved as platform.json in the node's directory, so it survives a
crash of the switch's software as hardware state does). `step` is the thermal policy: fans
follow the ASIC's temperature, a failed fan makes the others run flat out and the ASIC warmer,
and the alarms say what an operator must know. What the platform does to the dataplane
(shutting the ports of an overheated ASIC) is the daemon's
(harness/nodes/switch/platform/daemon.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

FANS, PSUS = 4, 2  # fan trays, and PSUs in N+1
INLET_C = 25.0
ASIC_IDLE_RISE_C = 35.0  # above the inlet, all fans turning
ASIC_RISE_PER_LOST_FAN_C = 8.0
MIN_RPM, MAX_RPM = 6000, 20000
FIRMWARE = {"bios": "5.29", "bmc": "2.14.1", "cpld": "0x1c", "sai-sdk": "fabric-lab-1.0"}


@dataclass
class Sensor:
    name: str
    celsius: float
    high: float  # alarm
    critical: float  # the platform protects itself: ports down
    forced: float | None = None  # a reading an operator (or a fault) set; None: the model's


@dataclass
class Fan:
    name: str
    ok: bool = True
    rpm: int = MIN_RPM


@dataclass
class Psu:
    name: str
    present: bool = True
    watts: float = 0.0


@dataclass
class PlatformState:
    node: str
    platform: str
    serial: str
    asic: str
    optics: dict[str, dict[str, str]]  # port -> vendor, part, serial
    sensors: list[Sensor]
    fans: list[Fan]
    psus: list[Psu]
    leds: dict[str, str] = field(default_factory=lambda: {"system": "green", "fan": "green",
                                                          "psu": "green"})
    oob: dict[str, str] = field(default_factory=lambda: {"management": "up",
                                                         "console": "ttyS0 115200"})
    firmware: dict[str, str] = field(default_factory=lambda: dict(FIRMWARE))
    ports_shut: bool = False  # by the thermal protection, so only it brings them back

    @property
    def powered(self) -> bool:
        return any(p.present for p in self.psus)

    def sensor(self, name: str) -> Sensor:
        return _named(self.sensors, name, "sensor")

    def fan(self, name: str) -> Fan:
        return _named(self.fans, name, "fan")

    def psu(self, name: str) -> Psu:
        return _named(self.psus, name, "PSU")

    def step(self, load_watts: float = 0.0) -> None:
        """The thermal policy for one tick: model readings, then fans and LEDs from them."""
        working = [f for f in self.fans if f.ok]
        lost = len(self.fans) - len(working)
        asic = INLET_C + ASIC_IDLE_RISE_C + ASIC_RISE_PER_LOST_FAN_C * lost
        model = {"inlet": INLET_C, "asic": asic, "outlet": INLET_C + (asic - INLET_C) / 2}
        for s in self.sensors:
            s.celsius = s.forced if s.forced is not None else model[s.name]
        hottest = max((s.celsius - INLET_C) / (s.high - INLET_C) for s in self.sensors)
        duty = 1.0 if lost else min(1.0, max(0.3, hottest))
        for f in self.fans:
            f.rpm = round(MIN_RPM + (MAX_RPM - MIN_RPM) * duty) if f.ok else 0
        present = [p for p in self.psus if p.present]
        for p in self.psus:
            p.watts = round(load_watts / len(present), 1) if p.present else 0.0
        self.leds["fan"] = "amber" if lost else "green"
        self.leds["psu"] = "amber" if len(present) < len(self.psus) else "green"
        self.leds["system"] = "red" if self.overheated() else (
            "amber" if self.alarms() else "green")

    def overheated(self) -> list[Sensor]:
        return [s for s in self.sensors if s.celsius >= s.critical]

    def alarms(self) -> list[str]:
        return list(self.raised().values())

    def raised(self) -> dict[str, str]:
        """The alarms by part and condition: a sensor warming past high stays one alarm."""
        found = {f"fan {f.name}": f"{f.name} failed: the others run at {MAX_RPM} rpm"
                 for f in self.fans if not f.ok}
        found |= {f"psu {p.name}": f"{p.name} absent: no PSU redundancy"
                  for p in self.psus if not p.present}
        for s in self.sensors:
            if s.celsius >= s.critical:
                found[f"sensor {s.name} critical"] = (
                    f"{s.name} {s.celsius:g} C past critical {s.critical:g} C: ports shut down")
            elif s.celsius >= s.high:
                found[f"sensor {s.name} high"] = f"{s.name} {s.celsius:g} C above high {s.high:g} C"
        if self.oob["management"] != "up":
            found["management"] = "management port down"
        return found

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "alarms": self.alarms(), "powered": self.powered}


def _named(items: list[Any], name: str, what: str) -> Any:
    for item in items:
        if item.name == name:
            return item
    raise ValueError(f"no {what} {name!r}; there are {', '.join(i.name for i in items)}")


def from_dict(data: dict[str, Any]) -> PlatformState:
    data = {k: v for k, v in data.items() if k not in ("alarms", "powered")}
    return PlatformState(**{**data, "sensors": [Sensor(**s) for s in data["sensors"]],
                            "fans": [Fan(**f) for f in data["fans"]],
                            "psus": [Psu(**p) for p in data["psus"]]})
