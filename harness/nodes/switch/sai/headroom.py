"""PFC headroom from a cable's length: what a lossless port must keep free once it sends PAUSE.

When an ingress queue crosses XOFF the port sends PAUSE, and until the sender stops, bytes
keep coming: those on the cable both ways (the PAUSE travels one length, the bytes already
sent travel back the other), those the sender transmits while it takes the PAUSE in (its
response time), and a frame each end had already begun. So

    headroom = 2 x one-way delay x rate + response x rate + 2 x MTU

bytes. FBOSS and SONiC size it from the cable length (measured, or configured per port);
provisioning every port for the longest cable the platform supports reserves far more. The
switch agent measures the length (harness/nodes/switch/agent/cable.py) and writes the result as the
port's lossless buffer profile (SAI_BUFFER_PROFILE_ATTR_XOFF_TH).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.topology.fibre import FIBRE_US_PER_KM

# IEEE 802.1Qbb: a port must act on PAUSE within 3840 bit times after the frame carrying it
# ends; ASICs quote about 1 us at 100G and above. The lab takes 1 us whatever the speed.
PFC_RESPONSE_US = 1.0
# A port that is a userspace engine (fl-port, harness/nodes/port) takes PAUSE in when its
# process wakes: it runs at a real-time priority, and bench/congestion.py prints the headroom
# each run used beyond the two frames already begun (on this 2-core VM: 0-60 us at 40 and
# 100 Mbit/s; now and then a stall of the VM's takes milliseconds, which no budget covers).
# The lab's own ports size their headroom with this bound, or they would drop what a real
# ASIC, answering in 1 us, never receives.
EMULATED_RESPONSE_US = 200.0
DEFAULT_MTU = 9216  # what RoCE fabrics run: one jumbo frame each end


@dataclass(frozen=True)
class Headroom:
    one_way_us: float
    rate_bps: int
    mtu: int = DEFAULT_MTU
    response_us: float = PFC_RESPONSE_US

    @property
    def km(self) -> float:
        return self.one_way_us / FIBRE_US_PER_KM

    @property
    def window_ns(self) -> int:
        """From PAUSE out to the last frame a sender on time still lands: the cable both
        ways and its response (a port engine's `pause_window_ns`)."""
        return round(self._in_flight_s * 1e9)

    @property
    def bytes(self) -> int:
        return math.ceil(self._in_flight_s * self.rate_bps / 8) + 2 * self.mtu

    @property
    def _in_flight_s(self) -> float:
        return (2 * self.one_way_us + self.response_us) / 1e6


def for_km(km: float, rate_bps: int, mtu: int = DEFAULT_MTU,
           response_us: float = PFC_RESPONSE_US) -> Headroom:
    return Headroom(km * FIBRE_US_PER_KM, rate_bps, mtu, response_us)


def pause_window_ns(one_way_us: float) -> int:
    """A port engine's pause window over a cable `one_way_us` long: its senders are engines
    too, answering within EMULATED_RESPONSE_US."""
    return Headroom(one_way_us, 0, response_us=EMULATED_RESPONSE_US).window_ns
