"""Cable length, measured as FBOSS does it, and the PFC headroom that follows from it.

Every switch agent reflects probes on CABLE_PORT, PTP's two-step way: it answers a probe at
once with the kernel's stamp of the probe's arrival, then follows up with the kernel's stamp
of the answer's departure, its residence time between the two. The prober sends probes down
one port to the address at the far end of that port's /31 and takes the kernel's stamps of
the probe leaving and the answer arriving. Kernel stamps on both sides and both ways, so
neither end's Python time is counted: an arrival is stamped as the frame comes off the link,
a departure as it enters the device's transmit path (TX_SCHED, ahead of tc's egress hook: a
frame the userspace impairment engine takes, where the emulated cable begins, gets no later
software stamp). The round trip less the residence is the cable twice; the smallest of
PROBES is the measurement, as queueing only ever adds. One way, at the fibre's
4.9 us/km, that is the cable's length, and the headroom the port's lossless buffer profile
needs (harness/nodes/switch/sai/headroom.py).
"""

from __future__ import annotations

import ipaddress
import select
import socket
import struct
import time
from dataclasses import dataclass
from typing import Any

from harness.nodes.switch.sai.headroom import PFC_RESPONSE_US, Headroom

CABLE_PORT = 3799
PROBES = 20
PROBE_GAP_S = 0.01
ANSWER_TIMEOUT_S = 0.2
GIVE_UP_AFTER = 3
STAMP_WAIT_S = 0.05  # a departure stamp is queued as the frame leaves: at once
_PROBE = struct.Struct("!4sBI")  # magic, kind, sequence
_STAMPS = struct.Struct("!4sBIqq")  # magic, kind, sequence, arrival, departure (kernel ns)
MAGIC = b"FLCB"
PROBE, ANSWER, FOLLOW_UP = 1, 2, 3
SO_TIMESTAMPING = getattr(socket, "SO_TIMESTAMPING", 37)
# Software stamps: on receive, and on send as the frame enters the device's transmit path
# (TX_SCHED, ahead of tc's egress hook: a frame redirected to an impairment engine's TAP gets
# no later software stamp), reported without the packet.
# Each departure stamp carries its datagram's number (OPT_ID), so a stamp is never paired
# with the wrong datagram.
_STAMPING = (1 << 8) | (1 << 3) | (1 << 4) | (1 << 7) | (1 << 11)
_EXTENDED_ERR = struct.Struct("=IBBBBII")  # struct sock_extended_err: ... ee_info, ee_data
IP_RECVERR = 11
_CMSG = socket.CMSG_SPACE(48)
MSG_ERRQUEUE = 0x2000


def _stamp_ns(ancillary: list[tuple[int, int, bytes]]) -> int | None:
    """The software stamp (CLOCK_REALTIME, ns) of an SCM_TIMESTAMPING message, if any."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPING and len(data) >= 16:
            seconds, nanoseconds = struct.unpack("qq", data[:16])
            return seconds * 1_000_000_000 + nanoseconds
    return None


def _stamped(sock: socket.socket) -> socket.socket:
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, _STAMPING)
    return sock


def _departure_ns(sock: socket.socket, number: int) -> int | None:
    """The kernel's stamp of the `number`th datagram this socket sent (from 0), from its
    error queue; older stamps still queued are passed over."""
    deadline = time.monotonic() + STAMP_WAIT_S
    while time.monotonic() < deadline:
        try:
            _, ancillary, _, _ = sock.recvmsg(1, _CMSG + socket.CMSG_SPACE(_EXTENDED_ERR.size),
                                              MSG_ERRQUEUE | socket.MSG_DONTWAIT)
        except BlockingIOError:
            select.select([], [], [sock], STAMP_WAIT_S / 10)
            continue
        stamp = _stamp_ns(ancillary)
        counted = next((_EXTENDED_ERR.unpack(data[:_EXTENDED_ERR.size])[-1]
                        for level, kind, data in ancillary
                        if level == socket.IPPROTO_IP and kind == IP_RECVERR), None)
        if stamp is not None and counted == number:
            return stamp
    return None


class Reflector:
    """The socket every agent answers probes on (the agent's selector watches it), and how
    many datagrams it has sent (what its departure stamps are numbered by)."""

    def __init__(self) -> None:
        self.sock = _stamped(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
        self.sock.bind(("0.0.0.0", CABLE_PORT))
        self.sock.setblocking(False)
        self.sent = 0

    def fileno(self) -> int:
        return self.sock.fileno()

    def reflect(self) -> None:
        """Answer every probe waiting with its arrival, then follow up with the answer's
        departure."""
        while answer := self._probe():
            sequence, arrival, sender = answer
            self.sock.sendto(_STAMPS.pack(MAGIC, ANSWER, sequence, arrival, 0), sender)
            departure = _departure_ns(self.sock, self.sent)
            self.sent += 1
            if departure is not None:
                self.sock.sendto(_STAMPS.pack(MAGIC, FOLLOW_UP, sequence, arrival, departure),
                                 sender)
                self.sent += 1

    def _probe(self) -> tuple[int, int, Any] | None:
        """The next waiting probe: its sequence number, arrival stamp and sender."""
        while True:
            try:
                data, ancillary, _, sender = self.sock.recvmsg(64, _CMSG)
            except BlockingIOError:
                return None
            if len(data) != _PROBE.size:
                continue
            magic, kind, sequence = _PROBE.unpack(data)
            arrival = _stamp_ns(ancillary)
            if magic == MAGIC and kind == PROBE and arrival is not None:
                return sequence, arrival, sender


@dataclass(frozen=True)
class Measurement:
    port: str
    peer: str
    one_way_us: float
    answered: int  # of PROBES

    def headroom(self, rate_bps: int, response_us: float = PFC_RESPONSE_US) -> Headroom:
        return Headroom(self.one_way_us, rate_bps, response_us=response_us)


def far_end(address: str) -> str:
    """The other address of a point-to-point /31 (RFC 3021)."""
    interface = ipaddress.ip_interface(address)
    if interface.network.prefixlen != 31:
        raise ValueError(f"{address} is not on a /31")
    return str(interface.ip + 1 if interface.ip == interface.network[0] else interface.ip - 1)


def measure(port: str, address: str) -> Measurement | None:
    """PROBES round trips down `port` to the far end of its /31 `address`; None if nothing
    answered (no agent there: a host, or the link is down)."""
    peer = far_end(address)
    with _stamped(socket.socket(socket.AF_INET, socket.SOCK_DGRAM)) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, port.encode())
        sock.bind((str(ipaddress.ip_interface(address).ip), 0))
        best, answered = None, 0
        for sequence in range(PROBES):
            if sequence == GIVE_UP_AFTER and not answered:
                break  # nothing answers there: no agent (a host), or the link is down
            sock.sendto(_PROBE.pack(MAGIC, PROBE, sequence), (peer, CABLE_PORT))
            round_trip = _round_trip(sock, sequence, _departure_ns(sock, sequence))
            if round_trip is not None:
                answered += 1
                best = round_trip if best is None else min(best, round_trip)
            time.sleep(PROBE_GAP_S)
    if best is None:
        return None
    return Measurement(port, peer, best / 2 / 1000, answered)


def _round_trip(sock: socket.socket, sequence: int, sent: int | None) -> int | None:
    """The probe's round trip less the reflector's residence (ns): from the answer's arrival
    and the follow-up's stamps; None if either did not come."""
    back = None
    deadline = time.monotonic() + ANSWER_TIMEOUT_S
    while sent is not None and (left := deadline - time.monotonic()) > 0:
        if not select.select([sock], [], [], left)[0]:
            return None
        data, ancillary, _, _ = sock.recvmsg(64, _CMSG)
        if len(data) != _STAMPS.size:
            continue
        magic, kind, answered, arrival, departure = _STAMPS.unpack(data)
        if magic != MAGIC or answered != sequence:
            continue
        if kind == ANSWER:
            back = _stamp_ns(ancillary)
        elif kind == FOLLOW_UP and back is not None:
            return (back - sent) - (departure - arrival)
    return None
