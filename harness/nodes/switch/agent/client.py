"""A node daemon's control socket, both ends: asking a node's agent
(harness/nodes/switch/agent/control.py answers) or platform daemon, as `labctl sai`, `inspect` and
the switch kind do, without loading the SAI model; and answering one request, as those daemons do.
One JSON request per connection, one JSON answer."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.core.errors import LabError

SOCKET_NAME = "sai.sock"
CONFIG_FILE = "sai-config.json"  # the configuration document (harness/nodes/switch/agent/config.py)
TE_FILE = "te-policies.json"  # the TE policies the switch heads (harness/nodes/switch/agent/te.py)
TIMEOUT_S = 10.0


def ask(node_dir: Path, request: dict[str, Any], timeout: float = TIMEOUT_S, *,
        daemon: tuple[str, str, str] = ("SAI agent", SOCKET_NAME, "agent.log")) -> Any:
    """Send one request to a node's agent (or another of its `daemon`s: what it is, its
    socket and its log) and return its result (LabError if unreachable)."""
    what, socket_name, log = daemon
    path = node_dir / socket_name
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(str(path))
            sock.sendall(json.dumps(request).encode() + b"\n")
            sock.shutdown(socket.SHUT_WR)
            data = b""
            while chunk := sock.recv(1 << 16):
                data += chunk
    except OSError as exc:
        raise LabError(f"the {what} does not answer on {path}: {exc.strerror or exc}; "
                       f"see {node_dir / log}") from None
    reply = json.loads(data)
    if not reply["ok"]:
        raise LabError(f"{what}: {reply['error']}")
    return reply["result"]


def serve_one(control: socket.socket, handle: Callable[[dict[str, Any]], Any],
              log: logging.Logger) -> None:
    """The other end of `ask`: accept one connection on the listening `control` socket and
    answer its request with what `handle` returns, or with the error of a request it rejects
    (ValueError, KeyError, TypeError)."""
    conn, _ = control.accept()
    with conn:
        conn.settimeout(5)
        try:
            data = b""
            while not data.endswith(b"\n") and (chunk := conn.recv(65536)):
                data += chunk
            try:
                reply = {"ok": True, "result": handle(json.loads(data))}
            except (ValueError, KeyError, TypeError) as exc:
                reply = {"ok": False, "error": str(exc)}
            conn.sendall(json.dumps(reply).encode() + b"\n")
        except OSError as exc:
            log.warning("control client: %s", exc)
