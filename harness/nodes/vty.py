"""FRR's vtysh protocol spoken directly to one daemon's vty socket, for read-only `show`
queries: no vtysh process per question.

Convergence and `inspect` ask every node's bgpd every few hundred milliseconds; a vtysh
process per question costs tens of milliseconds of CPU (more through `docker exec`), which on
a big lab starves the very daemons being asked. The daemon's socket is in the node's
directory, so the same path works for every runtime. The protocol (lib/vty.c, vtysh.c): the
client writes a command ending in NUL; the daemon answers with the output and four bytes,
three NULs and the command's return code (0 is success). A vtysh connection starts in view
mode, where most `show` commands are; some (bfdd's) only answer after `enable`.
"""

from __future__ import annotations

import socket
from pathlib import Path

from harness.core.errors import LabError

CMD_SUCCESS = 0
TRAILER = 4


def vty_show(vty_socket: Path, command: str, timeout: float = 10.0, *,
             enable: bool = False) -> str:
    if not command.startswith("show "):
        raise ValueError(f"only show commands go over the vty socket, not {command!r}")
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(str(vty_socket))
            if enable:
                _answer(sock, vty_socket, "enable")
            return _answer(sock, vty_socket, command)
    except OSError as exc:
        raise LabError(f"{vty_socket}: {command!r}: {exc}") from None


def _answer(sock: socket.socket, vty_socket: Path, command: str) -> str:
    sock.sendall(command.encode() + b"\0")
    reply = bytearray()
    while len(reply) < TRAILER or reply[-TRAILER:-1] != b"\0\0\0":
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise LabError(f"{vty_socket.name} closed the connection during {command!r}")
        reply += chunk
    if reply[-1] != CMD_SUCCESS:
        raise LabError(f"{vty_socket.name} refused {command!r} (code {reply[-1]}): "
                       f"{reply[:-TRAILER].decode(errors='replace').strip()}")
    return reply[:-TRAILER].decode()
