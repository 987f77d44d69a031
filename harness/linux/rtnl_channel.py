"""A plain rtnetlink socket inside one namespace: one acked request at a time, batches of
pre-encoded requests, and dumps decoded with pyroute2's message classes. The SAI kernel
backend programs nexthop objects and routes through it; the agent lists its ports with it
(pyroute2's IPRoute would add 0.15 s to every switch's start)."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

from pyroute2.netlink import NLM_F_ACK, NLM_F_REQUEST, NLMSG_ERROR, nlmsg

from harness.linux.nsenter import call_in_netns
from harness.linux.rtnl_batch import ACK_BUFFER, NLMSGHDR, dump, send_acked, split


class Channel:
    """An rtnetlink socket inside one namespace, one request at a time, acked.

    Requests are encoded with pyroute2's message classes and sent on a plain socket, so
    a request costs one sendmsg and one recv and nothing else.
    """

    def __init__(self, netns_path: str | None = None) -> None:
        def open_socket() -> int:
            return socket.socket(socket.AF_NETLINK, socket.SOCK_RAW,
                                 socket.NETLINK_ROUTE).detach()
        fd = call_in_netns(netns_path, open_socket) if netns_path else open_socket()
        self.sock = socket.socket(fileno=fd)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, ACK_BUFFER)
        self.sock.bind((0, 0))
        self.seq = 0

    def close(self) -> None:
        self.sock.close()

    def _send(self, msg: nlmsg, msg_type: int, flags: int) -> int:
        self.seq += 1
        msg["header"]["type"] = msg_type
        msg["header"]["flags"] = flags
        msg["header"]["sequence_number"] = self.seq
        msg["header"]["pid"] = 0
        msg.encode()
        self.sock.send(msg.data)
        return self.seq

    def request(self, msg: nlmsg, msg_type: int, flags: int = 0) -> int:
        """Send one change and wait for its ack; returns 0 or a positive errno."""
        seq = self._send(msg, msg_type, NLM_F_REQUEST | NLM_F_ACK | flags)
        while True:
            data = self.sock.recv(65536)
            for msg_type_in, seq_in, body in split(data):
                if seq_in == seq and msg_type_in == NLMSG_ERROR:
                    return -struct.unpack("=i", body[:4])[0]

    def request_many(self, messages: list[bytes], first_seq: int) -> list[int]:
        """Send pre-encoded acked requests (sequence numbers first_seq...) in few sendmsg calls
        and return one errno (0 = done) per request, in order."""
        return send_acked(self.sock, messages, first_seq)

    def reserve(self, count: int) -> int:
        """Reserve `count` sequence numbers for request_many; returns the first."""
        first = self.seq + 1
        self.seq += count
        return first

    def dump(self, msg: nlmsg, msg_type: int, cls: type[nlmsg]) -> Iterator[nlmsg]:
        """Every object a dump request answers, decoded with pyroute2's class `cls`."""
        msg.encode()
        self.seq += 1
        for kind, body in dump(self.sock, msg_type, bytes(msg.data)[NLMSGHDR.size:], self.seq):
            out = cls(NLMSGHDR.pack(NLMSGHDR.size + len(body), kind, 0, self.seq, 0) + body)
            out.decode()
            yield out
