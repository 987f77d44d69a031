"""Switch platforms a node can be (`platform:` in a topology): the hardware the labs mirror,
each with its front-panel ports and their speed, its ASIC, and the SAI table sizes its agent
starts with (harness/nodes/switch/sai/capacity.py makes them a capacity profile). Data only, so the
topology's checks and the SAI layer read the same catalogue.

Port counts, speeds and switching capacity are the published ones (OCP 2026 talks for Meta's
IceCube, Tahan and the next scale-up blade; Broadcom's for Tomahawk 5). Table sizes and buffers
of these ASICs are not published: the figures below are this lab's, of the right order for a
shallow-buffer merchant ASIC (a Tomahawk's buffer is tens of MB, not a chassis's GB), and a
lab that depends on them says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

MB = 1 << 20


@dataclass(frozen=True)
class Platform:
    name: str
    summary: str
    asic: str
    ports: int | None  # front-panel ports; None: as many as the lab cables
    port_speed_mbps: int
    switching_tbps: float | None  # the ASIC's, as published (not always ports x speed)
    # Of the ports, how many may face accelerators (the rest: scale-out, management); None: all.
    accelerator_ports: int | None
    # SAI table sizes and buffer_bytes (CapacityProfile's fields); unset: a Linux router's
    tables: Mapping[str, int] = field(default_factory=dict)

    def hardware(self) -> str:
        ports = (f"{self.ports} x {self.port_speed_mbps // 1000}G, {self.switching_tbps:g}T"
                 if self.ports else f"ports at {self.port_speed_mbps // 1000}G")
        return f"{ports}, {self.asic}"


def _shallow(buffer_mb: int) -> dict[str, int]:
    """A merchant ASIC's tables as this lab sizes them (see the module's docstring)."""
    return {"routes": 256_000, "next_hops": 32_768, "next_hop_groups": 4_096,
            "next_hop_group_members": 65_536, "neighbors": 32_768, "my_sids": 4_096,
            "sid_lists": 4_096, "buffer_bytes": buffer_mb * MB}


PLATFORMS = {p.name: p for p in (
    Platform("linux", "a Linux router: tables as large as memory", "Linux kernel", None,
             100_000, None, None),
    Platform("small", "a small fixed-pipeline ASIC, for labs that want the FIB to run out",
             "fixed pipeline", None, 100_000, None, None,
             {"routes": 16_384, "next_hops": 4_096, "next_hop_groups": 512,
              "next_hop_group_members": 4_096, "neighbors": 4_096, "my_sids": 256,
              "sid_lists": 256, "buffer_bytes": 64 * MB}),
    Platform("icecube", "Meta's IceCube fabric switch", "Tomahawk 6 or Spectrum-6", 128,
             800_000, 102.4, None, _shallow(250)),
    Platform("tahan", "Meta's Tahan scale-up switch: half its ports toward accelerators",
             "Tomahawk 5", 64, 800_000, 51.2, 32, _shallow(165)),
    Platform("scaleup-blade", "the next scale-up blade", "ASIC not named", 216, 400_000, 102.4,
             None, _shallow(250)),
)}
DEFAULT_PLATFORM = "linux"
