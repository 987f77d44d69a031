"""The capture instrument's pure parts: which ports a command line names, the filter libpcap
compiles, and the pcapng it writes, read back by tcpdump and scapy (independent parsers)."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.utils import PcapNgReader

from harness.core.errors import FabricLabError
from harness.instruments.capture import bpf_program, select_ports
from harness.instruments.pcapng import INBOUND, OUTBOUND, PcapngWriter
from harness.testing import plan_from
from harness.topology.plan import Endpoint

PLAN = plan_from("topologies/fpf-mini.yml")


def names(ends: list[Endpoint]) -> list[str]:
    return [str(e) for e in ends]


def test_a_port_a_node_a_link_and_a_plane_name_their_ports_once_each() -> None:
    assert names(select_ports(PLAN, ["host1:eth4"])) == ["host1:eth4"]
    assert names(select_ports(PLAN, ["host1"])) == [f"host1:eth{n}" for n in range(1, 9)]
    assert sorted(names(select_ports(PLAN, ["host1--p3-leaf1"]))) == \
        ["host1:eth4", "p3-leaf1:eth2"]
    assert set(names(select_ports(PLAN, ["p3-leaf*"]))) == \
        {f"p3-leaf{n}:eth{i}" for n in (1, 2) for i in (1, 2, 3)}
    plane = names(select_ports(PLAN, ["host1:eth4"], planes=[3]))
    assert len(plane) == len(set(plane)) == 12 and plane[0] == "host1:eth4"
    assert {p.split(":")[0] for p in plane} == \
        {"p3-spine1", "p3-leaf1", "p3-leaf2", "host1", "host2", "host3", "host4"}


@pytest.mark.parametrize("targets, planes, said", [
    (["host1:eth99"], [], "has no link 'host1:eth99'"),
    (["nohost"], [], "no node of lab fpf-mini matches 'nohost'"),
    (["host1--host2"], [], "has no link 'host1--host2'"),
    ([], [9], "has no plane 9; planes: [0, 1, 2, 3, 4, 5, 6, 7]"),
    ([], [], "name the ports to capture"),
])
def test_a_name_that_is_not_there_is_an_error_saying_what_is(targets, planes, said) -> None:
    with pytest.raises(FabricLabError, match=said.replace("[", r"\[").replace("]", r"\]")):
        select_ports(PLAN, targets, planes)


def test_the_filter_is_what_tcpdump_compiles() -> None:
    expression = "udp port 3784 or (ip6 and tcp)"
    dumped = subprocess.run(["tcpdump", "-ddd", "-y", "EN10MB", "-s", "2000", expression],
                            check=True, capture_output=True, text=True).stdout.split("\n")
    code = [tuple(map(int, line.split())) for line in dumped[1:int(dumped[0]) + 1]]
    program = bpf_program(expression, snaplen=2000)
    assert [struct.unpack("HBBI", program[i:i + 8]) for i in range(0, len(program), 8)] == code
    assert bpf_program("") == b""
    with pytest.raises(FabricLabError, match="filter 'udp prot 1'"):
        bpf_program("udp prot 1")


def test_the_pcapng_reads_back_in_tcpdump_and_scapy(tmp_path: Path) -> None:
    frame = bytes(Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=49152, dport=3784)
                  / b"bfd!")
    path = tmp_path / "two-ports.pcapng"
    with path.open("wb") as out:
        writer = PcapngWriter(out, "test")
        leaf = writer.add_interface("leaf1:eth1", "lab x, link leaf1:eth1--host1:eth1", 65535)
        host = writer.add_interface("host1:eth1", "lab x", 65535)
        writer.packet(leaf, 1_700_000_000_123456789, frame, len(frame), OUTBOUND)
        writer.packet(host, 1_700_000_000_123456999, frame[:30], len(frame), INBOUND)
        writer.statistics(leaf, 1_700_000_000_000000000, 1_700_000_001_000000000, 1, 3)
    text = subprocess.run(["tcpdump", "-r", str(path), "-n", "-tt", "--nano"], check=True,
                          capture_output=True, text=True).stdout.splitlines()
    assert [line.split()[0] for line in text] == ["1700000000.123456789",
                                                  "1700000000.123456999"]
    assert "IP 10.0.0.1.49152 > 10.0.0.2.3784" in text[0]
    packets = PcapNgReader(str(path)).read_all()
    assert [(p.sniffed_on, p.direction, p.wirelen, len(p)) for p in packets] == \
        [("leaf1:eth1", OUTBOUND, len(frame), len(frame)), ("host1:eth1", INBOUND, len(frame), 30)]
