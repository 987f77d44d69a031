"""fl-srv6 (fl_srv6.c), the SRv6 path where the kernel has no seg6: its TAP, its next-hop
addresses and MACs, starting it, and its control socket.

The engine outlives the agent that started it, as an ASIC's tables outlive a switch-OS
restart: a new agent finds it answering on its socket and reads its SIDs and lists back.
"""

from __future__ import annotations

import socket
import subprocess
from dataclasses import dataclass, field
from ipaddress import IPv6Address
from pathlib import Path

from harness.core.errors import LabError
from harness.core.wait import NotReady, wait_until

ENGINE = "fl-srv6"
TAP = "fls0"  # the agent makes no SAI port of it (agent/main.py)
SOCKET = "srv6.sock"
LOG = "srv6.log"
READY_TIMEOUT = 5.0
CONTROL_TIMEOUT = 2.0
MY_SID_INDEX = 0  # next hop index 0: look the packet's destination up among the SIDs
MAX_LISTS = 4095


def gateway(index: int) -> IPv6Address:
    """The link-local next hop that sends a packet to the engine for index `index`."""
    return IPv6Address(f"fe80::53:{index:x}")


def mac(index: int) -> str:
    """The permanent neighbour MAC of gateway(index): the engine reads the index off it."""
    return f"02:53:36:00:{index >> 8:02x}:{index & 0xff:02x}"


@dataclass
class Shown:
    """The engine's tables with their counters, as `show` prints them."""

    sids: dict[str, dict[str, int | str]] = field(default_factory=dict)
    lists: dict[int, dict[str, int | str]] = field(default_factory=dict)
    other_frames: int = 0


def parse_show(text: str) -> Shown:
    shown = Shown()
    for line in text.splitlines():
        kind, name, *rest = line.split()
        if kind == "other":
            shown.other_frames = int(name.split("=")[1])
            continue
        row: dict[str, int | str] = {"behavior" if kind == "sid" else "mode": rest[0]}
        for item in rest[1:]:
            key, _, value = item.partition("=")
            row[key] = value if key in ("segs", "nexthop") else int(value)
        if kind == "sid":
            shown.sids[name] = row
        else:
            shown.lists[int(name)] = row
    return shown


class Engine:
    """One switch's fl-srv6, reached on `directory/srv6.sock`."""

    def __init__(self, directory: Path) -> None:
        self.control = directory / SOCKET
        self.log = directory / LOG

    def request(self, message: str) -> str:
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
            sock.settimeout(CONTROL_TIMEOUT)
            try:
                sock.connect(str(self.control))
                sock.send(message.encode())
                return sock.recv(1 << 16).decode()
            except OSError as exc:
                raise LabError(f"SRv6 engine at {self.control} does not answer: {exc}") from None

    def command(self, message: str) -> None:
        reply = self.request(message)
        if reply != "ok":
            raise LabError(f"SRv6 engine refused `{message}`: {reply}")

    def answers(self) -> bool:
        try:
            self.request("show")
            return True
        except LabError:
            return False

    def show(self) -> Shown:
        return parse_show(self.request("show"))

    def start(self, program: str, source: IPv6Address, netns_path: str | None) -> None:
        """Start it detached (its own session: it must outlive the agent) unless one answers."""
        if self.answers():
            return
        argv = [program, "run", TAP, str(self.control), str(source)]
        if netns_path:
            argv = ["nsenter", f"--net={netns_path}", *argv]
        with open(self.log, "a") as log:
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                       start_new_session=True, close_fds=True)
        try:
            wait_until(self.answers, READY_TIMEOUT, every=0.01,
                       alive=lambda: process.poll() is None)
        except NotReady:
            process.kill()
            raise LabError(f"the SRv6 engine did not start: "
                           f"{self.log.read_text().strip()[-300:] or 'no output'}") from None
