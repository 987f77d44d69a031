"""Send `count` packets at a fixed rate from inside a node; write every send time to a file.

Usage: python -m harness.traffic.sender SRC SPORT DST PORT RATE_PPS COUNT SIZE LOGFILE

A fixed source port keeps the 5-tuple known, so a test can ask a switch's ECMP hash which
path the flow takes.

Pacing targets absolute send times (start + seq/rate), so a late packet does not shift the
ones after it and the flow keeps its nominal rate. A send that the kernel refuses (no route)
is logged like any other: the packet is lost, which is what the analysis must count.

Its one line of output is the start time (CLOCK_MONOTONIC ns), written just before the first
send: faults timed against the flow count from there, however long Python took to start.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import time
from array import array

from harness.traffic.wire import HEADER


def main(argv: list[str]) -> int:
    src, sport, dst, port, rate, count, size, log = argv
    family = socket.AF_INET6 if ":" in dst else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    sock.bind((src, int(sport)))
    interval_ns = int(1e9 / float(rate))
    padding = b"\0" * (int(size) - HEADER.size)
    sent = array("Q")
    target = (dst, int(port))
    start = time.monotonic_ns()
    print(start, flush=True)
    for seq in range(int(count)):
        due = start + seq * interval_ns
        now = time.monotonic_ns()
        if due > now:
            time.sleep((due - now) / 1e9)
        now = time.monotonic_ns()
        with contextlib.suppress(OSError):  # unroutable now: the receiver counts it lost
            sock.sendto(HEADER.pack(seq, now) + padding, target)
        sent.append(now)
    with open(log, "wb") as f:
        sent.tofile(f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
