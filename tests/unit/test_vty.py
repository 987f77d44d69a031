"""The vty client against a socket speaking FRR's vtysh protocol (output, 3 NULs, code)."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from harness.core.errors import LabError
from harness.nodes.vty import vty_show


@pytest.fixture(autouse=True)
def short_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sockets by relative name: a deep tmp_path would pass AF_UNIX's 108-byte limit."""
    monkeypatch.chdir(tmp_path)


def serve_once(path: Path, reply: bytes, chunk: int = 3) -> list[bytes]:
    """A daemon that answers one command with `reply`, written a few bytes at a time."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    received: list[bytes] = []

    def run() -> None:
        conn, _ = listener.accept()
        with conn, listener:
            data = b""
            while not data.endswith(b"\0"):
                data += conn.recv(100)
            received.append(data)
            for i in range(0, len(reply), chunk):
                conn.sendall(reply[i:i + chunk])

    threading.Thread(target=run, daemon=True).start()
    return received


def test_reads_output_up_to_the_trailer_and_sends_a_nul_terminated_command() -> None:
    sock = Path("bgpd.vty")
    received = serve_once(sock, b'{"ipv4": {}}\n' + b"\0\0\0\0")
    assert vty_show(sock, "show bgp summary json") == '{"ipv4": {}}\n'
    assert received == [b"show bgp summary json\0"]


def test_a_refused_command_is_an_error_with_the_daemons_words() -> None:
    sock = Path("bgpd.vty")
    serve_once(sock, b"% Unknown command: show nonsense\n" + b"\0\0\0\x02")
    with pytest.raises(LabError, match=r"refused 'show nonsense' \(code 2\).*Unknown command"):
        vty_show(sock, "show nonsense")


def test_a_daemon_that_hangs_up_mid_answer_is_an_error() -> None:
    sock = Path("zebra.vty")
    serve_once(sock, b"partial output")
    with pytest.raises(LabError, match="closed the connection"):
        vty_show(sock, "show version")


def test_only_show_commands_and_a_missing_socket_is_a_lab_error() -> None:
    with pytest.raises(ValueError):
        vty_show(Path("x.vty"), "configure terminal")
    with pytest.raises(LabError, match="No such file"):
        vty_show(Path("x.vty"), "show version")
