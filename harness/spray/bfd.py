"""BFD session state changes the instant they happen: from bfdd's control socket, or from the
node's BFD offload (fl-bfd) when bfdd hands its sessions there (FRR 8.4's bfdd does not tell
its control clients about changes a data plane reports).

Waiting for BGP to react to a BFD down costs bgpd's and zebra's work-queue hold times (50 ms
and 10 ms by default) plus the route churn; a host NIC that stops spraying on a dead plane
should not. bfdd (FRR) serves `bfdd.sock` in its pathspace: a client sends one NOTIFY request
and then receives every peer's current state and each later change as JSON.

Frame: length (u32, of the body), id (u16), type (u8), version (u8), then the body; all in
network byte order (bfdd/bfdctl.h).
"""

from __future__ import annotations

import json
import socket
import struct
from dataclasses import dataclass

HEADER = struct.Struct("!IHBB")
BMT_NOTIFY, BMT_VERSION = 0x04, 1
NOTIFY_ALL = 0xFFFF_FFFF_FFFF_FFFF
REQUEST_ID = 1


@dataclass(frozen=True)
class BfdState:
    nic: str
    ipv6: bool
    peer: str
    up: bool
    judged: float | None = None  # wall-clock s of the offload's tick that changed it, if any


def parse_frames(buffer: bytearray) -> list[dict]:
    """Take every complete frame off the front of `buffer`; return their JSON bodies."""
    bodies = []
    while len(buffer) >= HEADER.size:
        length = HEADER.unpack_from(buffer)[0]
        if len(buffer) < HEADER.size + length:
            break
        body = bytes(buffer[HEADER.size:HEADER.size + length])
        del buffer[:HEADER.size + length]
        if body:
            bodies.append(json.loads(body))
    return bodies


def state_of(message: dict) -> BfdState | None:
    """A session state from a notification, or None for other messages (config, replies)."""
    if message.get("op") != "status" or "local-interface" not in message:
        return None
    return BfdState(nic=message["local-interface"], ipv6=bool(message.get("ipv6")),
                    peer=message["peer-address"], up=message.get("state") == "up")


class BfdWatch:
    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        body = struct.pack("!Q", NOTIFY_ALL)
        self.sock.sendall(HEADER.pack(len(body), REQUEST_ID, BMT_NOTIFY, BMT_VERSION) + body)
        self.sock.setblocking(False)
        self.buffer = bytearray()

    def fileno(self) -> int:
        return self.sock.fileno()

    def read(self) -> list[BfdState] | None:
        """States that arrived; None once bfdd closed the socket (it died or restarted)."""
        try:
            data = self.sock.recv(65536)
        except BlockingIOError:
            return []
        except ConnectionResetError:  # killed with our request unread (a node crash)
            data = b""
        if not data:
            self.sock.close()
            return None
        self.buffer += data
        return [s for m in parse_frames(self.buffer) if (s := state_of(m)) is not None]


class EngineWatch:
    """The BFD offload's feed (harness/nodes/bfd/fl_bfd.c): "IFNAME 4|6 PEER up|down|gone
    WALL_US" per message, every session on connect; a session gone no longer holds its plane
    down."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.connect(path)
        self.sock.setblocking(False)

    def fileno(self) -> int:
        return self.sock.fileno()

    def read(self) -> list[BfdState] | None:
        """States that arrived; None once the engine closed the socket (it died)."""
        states = []
        while True:
            try:
                message = self.sock.recv(512)
            except BlockingIOError:
                return states
            except ConnectionResetError:  # killed with our messages unread (a node crash)
                message = b""
            if not message:
                self.sock.close()
                return None
            nic, family, peer, state, judged = message.decode().split()
            states.append(BfdState(nic=nic, ipv6=family == "6", peer=peer, up=state != "down",
                                   judged=int(judged) / 1e6 or None))  # 0: not yet
