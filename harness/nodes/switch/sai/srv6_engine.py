"""fl-srv6 (fl_srv6.c), the SRv6 path where the kernel has no seg6: its TAP, its next-hop
addresses and MACs, starting it, and its control socket.

The engine outlives the agent that started it (harness/linux/detached.py): a new agent finds
it answering on its socket and reads its SIDs and lists back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from ipaddress import IPv6Address
from pathlib import Path

from harness.linux.detached import DetachedEngine

ENGINE = "fl-srv6"
TAP = "fls0"  # the agent makes no SAI port of it (agent/main.py)
SOCKET = "srv6.sock"
LOG = "srv6.log"
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


class Engine(DetachedEngine):
    """One switch's fl-srv6, reached on `directory/srv6.sock`."""

    what = "SRv6 engine"
    probe = "show"

    def __init__(self, directory: Path) -> None:
        super().__init__(directory / SOCKET, directory / LOG)

    def show(self) -> Shown:
        return parse_show(self.request("show"))

    def run(self, program: str, source: IPv6Address, netns_path: str | None) -> None:
        """Start it unless one answers (it outlives the agent)."""
        self.start([program, "run", TAP, str(self.control), str(source)], netns_path)
