"""The mininet runtime: Mininet makes the nodes, its CLI drives the lab (here from a pipe, as
without a terminal), and destroy leaves nothing of either, also after SIGKILL of deploy."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from scapy.utils import rdpcap

from bench.deploy import run_mininet
from harness.testing import chaos
from harness.testing.chaos import LABCTL, labctl
from harness.testing.hoststate import differences, processes_mentioning, snapshot
from harness.topology.pipeline import plan_from_file
from tests.conftest import TOPOLOGIES
from tests.e2e.conftest import leftovers

pytestmark = pytest.mark.e2e
SERVER = "mininet_net.py"


def test_mininet_cli_drives_the_lab_and_its_end_destroys_it() -> None:
    plan = plan_from_file(TOPOLOGIES / "clos.yml", "e2emn")
    hosts = [n for n in plan.nodes if n.role.value == "host"]
    target = hosts[-1].loopback4
    commands = f"nodes\n{hosts[0].name} ping -c 2 -W 2 {target}\n" \
               f"{hosts[0].name} ping -c 1 -W 2 {hosts[-1].name}\nexit\n"
    out = subprocess.run([*LABCTL, "mininet", str(TOPOLOGIES / "clos.yml"), "--name", "e2emn"],
                         input=commands, capture_output=True, text=True, timeout=300)
    said = out.stdout + out.stderr  # Mininet prints its answers through its logger, on stderr
    assert out.returncode == 0 and "available nodes are:" in said, said
    listed = said.split("available nodes are:", 1)[1].split("PING", 1)[0].split()
    assert sorted(listed) == sorted(n.name for n in plan.nodes)
    assert "2 packets transmitted, 2 received" in said, said
    # `host1 ping host4`: Mininet put host4's loopback for its name
    assert f"PING {target} " in said.split("2 received", 1)[1], said
    assert "1 packets transmitted, 1 received" in said, said
    assert not leftovers("e2emn") and not processes_mentioning(SERVER)


def test_detached_mininet_lab_is_inspected_captured_and_destroyed(tmp_path: Path) -> None:
    out = labctl("deploy", str(TOPOLOGIES / "pair.yml"), "--name", "e2emnd", "--runtime",
                 "mininet")
    try:
        assert out.returncode == 0, out.stderr
        assert processes_mentioning(SERVER)
        assert labctl("inspect", "e2emnd").returncode == 0
        pcap = tmp_path / "bgp.pcapng"  # BGP's keepalives, sent and heard at both ends
        captured = labctl("capture", "e2emnd", "r1--r2", "-f", "tcp port 179", "-c", "4",
                          "-w", str(pcap))
        assert captured.returncode == 0 and "4 frames to" in captured.stderr, captured
        assert {f.sniffed_on for f in rdpcap(str(pcap))} == {"r1:eth1", "r2:eth1"}
    finally:
        assert labctl("destroy", "e2emnd").returncode == 0
    assert not leftovers("e2emnd") and not processes_mentioning(SERVER)


def test_sigkill_of_a_mininet_deploy_then_destroy_leaves_nothing() -> None:
    done = chaos.run(chaos.Chaos(TOPOLOGIES / "clos.yml", "e2emnchaos", "mininet"), 4)
    print(done.summary())
    assert done.clean and not processes_mentioning(SERVER), done.summary()


def test_the_deploy_benchs_mininet_baseline_leaves_the_hosts_limits_alone(
        tmp_path: Path) -> None:
    """`Mininet()` runs Mininet's fixLimits unless told it ran: the ARP table's limits, socket
    buffers and kernel.pty.max raised on the host for good. The bench's baseline must not."""
    plan = plan_from_file(TOPOLOGIES / "pair.yml", "e2emnb")
    before = snapshot()
    assert run_mininet(plan, tmp_path) is not None  # Debian's mininet is installed here
    assert differences(before, snapshot()) == []
