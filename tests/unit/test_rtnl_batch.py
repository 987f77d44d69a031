"""The hand-packed netlink messages decode, with pyroute2's parser, to what was asked for."""

from __future__ import annotations

import errno
import socket
import struct

from pyroute2.netlink import NLM_F_ACK, NLM_F_REQUEST, NLMSG_ERROR
from pyroute2.netlink.rtnl.ifaddrmsg import ifaddrmsg
from pyroute2.netlink.rtnl.ifinfmsg import IFF_UP, ifinfmsg

from harness.linux.rtnl_batch import RtnlBatch, send_acked


def queued(batch: RtnlBatch, cls: type) -> list:
    out = []
    for _, _, data in batch.pending:
        msg = cls(data)
        msg.decode()
        out.append(msg)
    return out


def test_addresses_decode_as_sent() -> None:
    batch = RtnlBatch(socket.socket())
    batch.add_address(7, "10.1.0.1/31")
    batch.add_address(7, "fd00:0:1::1/127")
    v4, v6 = queued(batch, ifaddrmsg)
    assert (v4["family"], v4["prefixlen"], v4["index"]) == (socket.AF_INET, 31, 7)
    assert v4.get_attr("IFA_LOCAL") == v4.get_attr("IFA_ADDRESS") == "10.1.0.1"
    assert (v6["family"], v6["prefixlen"]) == (socket.AF_INET6, 127)
    assert v6.get_attr("IFA_ADDRESS") == "fd00:0:1::1"
    assert [seq for seq, _, _ in batch.pending] == [1, 2]


def test_link_up_and_veth_decode_as_sent() -> None:
    batch = RtnlBatch(socket.socket())
    batch.set_up(100)
    batch.add_veth(101, "eth1", 9000, 102, "eth2", 5)
    up, veth = queued(batch, ifinfmsg)
    assert (up["index"], up["flags"], up["change"]) == (100, IFF_UP, IFF_UP)
    assert (veth["index"], veth["flags"], veth["change"]) == (101, IFF_UP, IFF_UP)
    assert veth.get_attr("IFLA_IFNAME") == "eth1" and veth.get_attr("IFLA_MTU") == 9000
    info = veth.get_attr("IFLA_LINKINFO")
    assert info.get_attr("IFLA_INFO_KIND") == "veth"
    peer = info.get_attr("IFLA_INFO_DATA").get_attr("VETH_INFO_PEER")
    assert peer["index"] == 102 and peer.get_attr("IFLA_IFNAME") == "eth2"
    assert peer.get_attr("IFLA_MTU") == 9000
    assert peer.get_attr("IFLA_NET_NS_FD") == 5


class FakeNetlink:
    """Answers like the kernel: an error for every failed request, an ACK only when asked."""

    def __init__(self, failing: dict[int, int]) -> None:
        self.failing = failing  # seq -> errno
        self.sends: list[list[tuple[int, bool]]] = []  # per send: (seq, asked for an ACK)
        self.replies: list[bytes] = []

    def send(self, data: bytes) -> None:
        sent = []
        offset = 0
        while offset < len(data):
            length, _, flags, seq, _ = struct.unpack_from("=LHHLL", data, offset)
            sent.append((seq, bool(flags & NLM_F_ACK)))
            code = self.failing.get(seq, 0)
            if code or flags & NLM_F_ACK:
                body = struct.pack("=i", -code) + data[offset:offset + 16]
                self.replies.append(struct.pack("=LHHLL", 16 + len(body), NLMSG_ERROR, 0, seq,
                                                0) + body)
            offset += length
        self.sends.append(sent)

    def recv(self, _size: int) -> bytes:
        return self.replies.pop(0)


def test_send_acked_asks_one_ack_per_send_and_places_every_error() -> None:
    body = bytes(3000)  # 20 of these fill a send
    messages = [struct.pack("=LHHLL", 16 + len(body), 24, NLM_F_REQUEST, 100 + i, 0)
                + body for i in range(45)]
    sock = FakeNetlink(failing={103: errno.EEXIST, 119: errno.ENODEV, 144: errno.EINVAL})
    results = send_acked(sock, messages, 100)  # type: ignore[arg-type]
    assert [len(s) for s in sock.sends] == [19, 19, 7]
    assert all(asked == (i == len(s) - 1) for s in sock.sends for i, (_, asked) in enumerate(s))
    assert {i: e for i, e in enumerate(results) if e} == {3: errno.EEXIST, 19: errno.ENODEV,
                                                         44: errno.EINVAL}
    assert sock.replies == []
