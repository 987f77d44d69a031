"""A pcapng writer (pure): one section, an interface block per captured port, packets stamped to
the nanosecond with their direction, and each port's drop count at the end.

pcapng, not pcap, because one file holds many ports: Wireshark, tshark and scapy show each
frame's port (the interface's `if_name`, here NODE:PORT) and direction (the `epb_flags`
inbound/outbound bits), which a pcap of merged ports would lose.
"""

from __future__ import annotations

import struct
from typing import BinaryIO

SHB, IDB, EPB, ISB = 0x0A0D0D0A, 0x00000001, 0x00000006, 0x00000005
BYTE_ORDER_MAGIC = 0x1A2B3C4D
LINKTYPE_ETHERNET = 1
OPT_END = 0
SHB_USERAPPL = 4
IF_NAME, IF_DESCRIPTION, IF_TSRESOL = 2, 3, 9
EPB_FLAGS = 2
ISB_STARTTIME, ISB_ENDTIME, ISB_IFRECV, ISB_IFDROP = 2, 3, 4, 5
NANOSECONDS = 9  # if_tsresol: 10^-9 s
INBOUND, OUTBOUND = 1, 2  # epb_flags bits 0-1


def _pad(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 4)


def _option(code: int, value: bytes) -> bytes:
    return struct.pack("<HH", code, len(value)) + _pad(value)


def _options(*options: bytes) -> bytes:
    return b"".join(options) + struct.pack("<HH", OPT_END, 0) if options else b""


def _block(kind: int, body: bytes) -> bytes:
    length = 12 + len(body)
    return struct.pack("<II", kind, length) + body + struct.pack("<I", length)


def _stamp(ns: int) -> bytes:
    """A timestamp as pcapng stores it: high and low 32 bits, in if_tsresol units."""
    return struct.pack("<II", ns >> 32, ns & 0xFFFFFFFF)


class PcapngWriter:
    """Blocks written as they come, so a reader (Wireshark on a pipe) sees every frame at once."""

    def __init__(self, out: BinaryIO, application: str) -> None:
        self.out = out
        self.interfaces = 0
        out.write(_block(SHB, struct.pack("<IHHq", BYTE_ORDER_MAGIC, 1, 0, -1)
                         + _options(_option(SHB_USERAPPL, application.encode()))))

    def add_interface(self, name: str, description: str, snaplen: int) -> int:
        """An interface block; returns its id, which its packets name."""
        self.out.write(_block(IDB, struct.pack("<HHI", LINKTYPE_ETHERNET, 0, snaplen) + _options(
            _option(IF_NAME, name.encode()), _option(IF_DESCRIPTION, description.encode()),
            _option(IF_TSRESOL, bytes([NANOSECONDS])))))
        self.interfaces += 1
        return self.interfaces - 1

    def packet(self, interface: int, ns: int, data: bytes, length: int, direction: int) -> None:
        """One frame: `data` as captured (maybe cut to the snaplen), `length` as it was."""
        self.out.write(_block(EPB, struct.pack("<I", interface) + _stamp(ns)
                              + struct.pack("<II", len(data), length) + _pad(data)
                              + _options(_option(EPB_FLAGS, struct.pack("<I", direction)))))

    def statistics(self, interface: int, start_ns: int, end_ns: int, received: int,
                   dropped: int) -> None:
        """What the port's capture saw and what the kernel dropped before it could be read."""
        self.out.write(_block(ISB, struct.pack("<I", interface) + _stamp(end_ns) + _options(
            _option(ISB_STARTTIME, _stamp(start_ns)), _option(ISB_ENDTIME, _stamp(end_ns)),
            _option(ISB_IFRECV, struct.pack("<Q", received)),
            _option(ISB_IFDROP, struct.pack("<Q", dropped)))))
