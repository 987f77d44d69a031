"""The default Clos, for real: FRR sessions, pings and TCP between every pair of hosts."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import stat
import subprocess

import pytest

from harness.cli.lifecycle import saved_configs
from harness.deploy.lab import Lab
from harness.testing.chaos import labctl
from tests.e2e.conftest import leftovers

pytestmark = pytest.mark.e2e

TCP_ECHO_SERVER = """
import socket, sys
s = socket.socket(socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 5001)); s.listen(16); s.settimeout(60)
print('ready', flush=True)
for _ in range(int(sys.argv[2])):
    c, _ = s.accept(); c.sendall(c.recv(64)); c.close()
"""
TCP_CLIENT = """
import socket, sys
c = socket.create_connection((sys.argv[1], 5001), timeout=5)
c.sendall(sys.argv[2].encode()); print(c.recv(64).decode())
"""


def hosts(lab: Lab) -> list[str]:
    return [n.name for n in lab.plan.nodes if n.role.value == "host"]


def test_every_planned_session_is_established(clos_lab: Lab) -> None:
    for node in clos_lab.plan.nodes:
        states = clos_lab.frr(node.name).bgp_peer_states()
        planned = {s.peer_ip for s in clos_lab.plan.sessions_of(node.name)}
        assert planned and {states.get(p) for p in planned} == {"Established"}, node.name


@pytest.mark.parametrize("family", ["loopback4", "loopback6"])
def test_ping_between_every_host_pair(clos_lab: Lab, family: str) -> None:
    for a, b in itertools.permutations(hosts(clos_lab), 2):
        target = getattr(clos_lab.plan.node(b), family)
        out = clos_lab.node(a).cmd("ping", "-c", "2", "-i", "0.2", "-W", "2", target)
        assert out.returncode == 0, f"{a} -> {b} ({target}): {out.stdout}{out.stderr}"


@pytest.mark.parametrize("family", ["loopback4", "loopback6"])
def test_tcp_between_every_host_pair(clos_lab: Lab, family: str) -> None:
    names = hosts(clos_lab)
    servers = {}
    for b in names:
        addr = getattr(clos_lab.plan.node(b), family)
        servers[b] = clos_lab.node(b).popen(
            ["python3", "-c", TCP_ECHO_SERVER, addr, str(len(names) - 1)],
            stdout=-1, text=True)
        assert servers[b].stdout.readline().strip() == "ready"
    try:
        for a, b in itertools.permutations(names, 2):
            word = f"{a}-to-{b}"
            out = clos_lab.node(a).cmd("python3", "-c", TCP_CLIENT,
                                       getattr(clos_lab.plan.node(b), family), word)
            assert out.stdout.strip() == word, out.stderr
    finally:
        for proc in servers.values():
            proc.kill()
            proc.wait()


def test_traffic_leaves_from_the_loopback(clos_lab: Lab) -> None:
    target = clos_lab.plan.node("host2").loopback4
    route = clos_lab.node("host1").cmd("ip", "route", "get", target).stdout
    assert f"src {clos_lab.plan.node('host1').loopback4}" in route


def test_inspect_json_reports_every_node_running(clos_lab: Lab) -> None:
    out = labctl("inspect", "e2eclos", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["nodes"]
    assert {r["node"] for r in rows} == {n.name for n in clos_lab.plan.nodes}
    for r in rows:
        assert r["state"] == "running" and r["bgp_up"] == r["bgp_total"] > 0, r


def test_exec_vtysh_save_and_graph(clos_lab: Lab) -> None:
    out = labctl("exec", "e2eclos/host1", "--", "ip", "-j", "addr", "show", "lo")
    assert clos_lab.plan.node("host1").loopback4 in out.stdout
    out = labctl("vtysh", "e2eclos/leaf1", "-c", "show bgp summary json")
    assert json.loads(out.stdout)["ipv4Unicast"]["as"] == clos_lab.plan.node("leaf1").asn
    out = labctl("exec", "e2eclos/nosuch", "--", "true")
    assert out.returncode == 2 and "no node 'nosuch'" in out.stderr
    folder = saved_configs(clos_lab.plan)  # beside the topology, as containerlab's save
    try:
        assert labctl("save", "e2eclos").returncode == 0
        saved = (folder / "spine1" / "frr.conf").read_text()
        assert f"router bgp {clos_lab.plan.node('spine1').asn}" in saved
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for fmt, marker in (("dot", "graph"), ("mermaid", "graph BT"), ("html", "<svg")):
        out = labctl("graph", "e2eclos", "--format", fmt)
        assert out.returncode == 0 and marker in out.stdout and "leaf1" in out.stdout


def test_write_memory_saves_into_the_lab_not_the_host(clos_lab: Lab) -> None:
    saved = clos_lab.dir / "nodes" / "leaf1" / "frr.conf"
    saved.write_text("! overwritten by the test\n")
    out = labctl("vtysh", "e2eclos/leaf1", "-c", "write memory")
    assert out.returncode == 0 and str(saved) in out.stdout, out.stdout + out.stderr
    assert f"router bgp {clos_lab.plan.node('leaf1').asn}" in saved.read_text()
    frr = clos_lab.frr("leaf1")
    out = subprocess.run(frr.vtysh_argv("-d", "zebra", "-c", "write file"), capture_output=True,
                         text=True, timeout=30)
    assert str(saved) in out.stdout and not out.stderr, out.stdout + out.stderr
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)  # the host-state check covers /etc/frr


def test_destroy_leaves_nothing(clos_lab: Lab) -> None:
    assert leftovers("e2eclos")  # the lab is really there before
    clos_lab.destroy()
    assert leftovers("e2eclos") == []
