"""FPM framing: zebra's `dplane_fpm_nl` writes frames of {version 1, type 1 (netlink),
length (network order, header included)} followed by one or more netlink messages."""

from __future__ import annotations

import struct

FPM_HEADER = struct.Struct("!BBH")
FPM_VERSION, FPM_TYPE_NETLINK = 1, 1
FPM_PORT = 2620


class FpmError(ValueError):
    pass


class FpmReader:
    """Splits the bytes of the FPM socket into frames and returns their netlink payloads."""

    def __init__(self) -> None:
        self.buffer = bytearray()  # the start of a frame whose end has not arrived
        self.frames = 0

    def feed(self, data: bytes) -> list[bytes]:
        """The payload of every netlink frame `data` completes, in order. Frames are cut
        from `data` itself: a receive mostly holds whole frames, one route each."""
        if self.buffer:
            data = bytes(self.buffer + data)
            self.buffer.clear()
        payloads, offset, end = [], 0, len(data)
        while end - offset >= FPM_HEADER.size:
            version, kind, length = FPM_HEADER.unpack_from(data, offset)
            if version != FPM_VERSION or length < FPM_HEADER.size:
                raise FpmError(f"bad FPM header: version {version}, length {length}")
            if end - offset < length:
                break
            if kind == FPM_TYPE_NETLINK:
                payloads.append(data[offset + FPM_HEADER.size:offset + length])
            offset += length
            self.frames += 1
        self.buffer += data[offset:]
        return payloads


def frame(payload: bytes) -> bytes:
    """One FPM frame around netlink bytes (what zebra sends; used by tests and the bench)."""
    return FPM_HEADER.pack(FPM_VERSION, FPM_TYPE_NETLINK, FPM_HEADER.size + len(payload)) + payload
