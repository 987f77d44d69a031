"""The hand-packed netlink messages decode, with pyroute2's parser, to what was asked for."""

from __future__ import annotations

import socket

from pyroute2.netlink.rtnl.ifaddrmsg import ifaddrmsg
from pyroute2.netlink.rtnl.ifinfmsg import IFF_UP, ifinfmsg

from harness.runtime.rtnl_batch import RtnlBatch


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
    assert veth["index"] == 101 and veth.get_attr("IFLA_MTU") == 9000
    info = veth.get_attr("IFLA_LINKINFO")
    assert info.get_attr("IFLA_INFO_KIND") == "veth"
    peer = info.get_attr("IFLA_INFO_DATA").get_attr("VETH_INFO_PEER")
    assert peer["index"] == 102 and peer.get_attr("IFLA_IFNAME") == "eth2"
    assert peer.get_attr("IFLA_NET_NS_FD") == 5
