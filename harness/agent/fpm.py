"""FPM framing: zebra's `dplane_fpm_nl` writes frames of {version 1, type 1 (netlink),
length (network order, header included)} followed by one or more netlink messages."""

from __future__ import annotations

import struct
from collections.abc import Iterator

FPM_HEADER = struct.Struct("!BBH")
FPM_VERSION, FPM_TYPE_NETLINK = 1, 1
FPM_PORT = 2620


class FpmError(ValueError):
    pass


class FpmReader:
    """Accumulates bytes from the FPM socket and yields the netlink payload of each frame."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.frames = 0

    def feed(self, data: bytes) -> Iterator[bytes]:
        self.buffer += data
        while len(self.buffer) >= FPM_HEADER.size:
            version, kind, length = FPM_HEADER.unpack_from(self.buffer)
            if version != FPM_VERSION or length < FPM_HEADER.size:
                raise FpmError(f"bad FPM header: version {version}, length {length}")
            if len(self.buffer) < length:
                return
            payload = bytes(self.buffer[FPM_HEADER.size:length])
            del self.buffer[:length]
            self.frames += 1
            if kind == FPM_TYPE_NETLINK:
                yield payload


def frame(payload: bytes) -> bytes:
    """One FPM frame around netlink bytes (what zebra sends; used by tests and the bench)."""
    return FPM_HEADER.pack(FPM_VERSION, FPM_TYPE_NETLINK, FPM_HEADER.size + len(payload)) + payload
