"""Receive a test flow inside a node, noting for every packet when and on which NIC it came.

Usage: python -m harness.traffic.receiver ADDR PORT OUTFILE
Prints `ready` once bound; on SIGTERM writes OUTFILE (JSON) and exits.

The ingress NIC comes from IP_PKTINFO, so per-plane counts are those of this flow's packets,
not of every packet (BFD, BGP) that crossed the interface.

The arrival time is the kernel's (SO_TIMESTAMPNS: when the packet entered this namespace's
stack), not when this process woke to read it: on a loaded or virtualised box the wake-up
costs tens to hundreds of microseconds, varies from moment to moment, and is no part of the
network's delay. The kernel stamps CLOCK_REALTIME; the sender stamps CLOCK_MONOTONIC, so each
stamp is moved onto the monotonic clock by the offset between the two read just after it.
"""

from __future__ import annotations

import json
import signal
import socket
import struct
import sys
import time

from harness.traffic.wire import HEADER

IP_PKTINFO = 8
IPV6_RECVPKTINFO, IPV6_PKTINFO = 49, 50
IN_PKTINFO = struct.Struct("i4s4s")
IN6_PKTINFO = struct.Struct("16si")
SO_RCVBUFFORCE = 33  # not exported by the socket module; root may exceed rmem_max
SO_TIMESTAMPNS = SCM_TIMESTAMPNS = 35  # nor these
TIMESPEC = struct.Struct("qq")
RCVBUF = 8 << 20  # a burst after a stall must not overflow the socket


def main(argv: list[str]) -> int:
    addr, port, out = argv
    v6 = ":" in addr
    sock = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    if v6:
        sock.setsockopt(socket.IPPROTO_IPV6, IPV6_RECVPKTINFO, 1)
    else:
        sock.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
    sock.bind((addr, int(port)))
    sock.settimeout(0.1)
    stop = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.append(signum))
    seqs, sent_ns, recv_ns, ifindex = [], [], [], []
    print("ready", flush=True)
    while not stop:
        try:
            data, ancillary, _, _ = sock.recvmsg(2048, 256)
        except (TimeoutError, InterruptedError):
            continue
        offset = time.clock_gettime_ns(time.CLOCK_REALTIME) - time.monotonic_ns()
        if len(data) < HEADER.size:
            continue
        seq, sent = HEADER.unpack_from(data)
        index = arrived = 0
        for level, kind, payload in ancillary:
            if (level, kind) == (socket.SOL_SOCKET, SCM_TIMESTAMPNS):
                sec, nsec = TIMESPEC.unpack(payload)
                arrived = sec * 1_000_000_000 + nsec - offset
            elif kind == (IPV6_PKTINFO if v6 else IP_PKTINFO):
                index = (IN6_PKTINFO.unpack(payload)[1] if v6 else
                         IN_PKTINFO.unpack(payload)[0])
        seqs.append(seq)
        sent_ns.append(sent)
        recv_ns.append(arrived)
        ifindex.append(index)
    names = dict(socket.if_nameindex())
    with open(out, "w") as f:
        json.dump({"seq": seqs, "sent_ns": sent_ns, "recv_ns": recv_ns,
                   "nic": [names.get(i, str(i)) for i in ifindex]}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
