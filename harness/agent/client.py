"""Asking a node's agent over its control socket (harness/agent/control.py answers): what
`labctl sai`, `inspect` and the switch kind need, without loading the SAI model."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from harness.errors import LabError

SOCKET_NAME = "sai.sock"
CONFIG_FILE = "sai-config.json"  # the configuration document (harness/agent/config.py)
TE_FILE = "te-policies.json"  # the TE policies the switch heads (harness/agent/te.py)
TIMEOUT_S = 10.0


def ask(node_dir: Path, request: dict[str, Any], timeout: float = TIMEOUT_S) -> Any:
    """Send one request to a node's agent and return its result (LabError if unreachable)."""
    path = node_dir / SOCKET_NAME
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
        raise LabError(f"the SAI agent does not answer on {path}: {exc.strerror or exc}; "
                       f"see {node_dir / 'agent.log'}") from None
    reply = json.loads(data)
    if not reply["ok"]:
        raise LabError(f"SAI agent: {reply['error']}")
    return reply["result"]
