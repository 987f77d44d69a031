"""A fabric of `kind: sai` switches with real FRR: zebra -> FPM -> agent -> SAI -> kernel."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.core.errors import LabError
from harness.core.events import read
from harness.core.paths import lab_netns_prefix
from harness.core.wait import wait_until
from harness.deploy.converge import wait_converged
from harness.deploy.lab import Lab, deploy
from harness.faults import Faults
from harness.linux.nsenter import list_netns
from harness.nodes.columns import lab_status
from harness.nodes.switch.agent.client import ask
from harness.nodes.switch.sai.kernel import SAI_TABLE
from harness.testing.plugin import RUNTIME
from harness.topology.reachability import reachable_origins
from tests.conftest import TOPOLOGIES

pytestmark = pytest.mark.e2e
NAME = "saie2e"
LABCTL = [str(Path(sys.executable).with_name("labctl"))]  # the entry point of this venv
SWITCHES = ("spine1", "spine2", "leaf1", "leaf2")


def labctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LABCTL, *args], capture_output=True, text=True, timeout=120)


def wait_for(what: str, check: Callable[[], object], timeout: float = 20.0) -> None:
    wait_until(check, timeout, lambda _: AssertionError(f"timed out waiting for {what}"))


def table(lab: Lab, node: str, number: int | str, prefix: str = "") -> str:
    return lab.node(node).cmd("ip", "route", "show", "table", str(number),
                              *([prefix] if prefix else [])).stdout


def agent(lab: Lab, node: str, request: dict | None = None):
    return ask(lab.frr(node).workdir, request or {"cmd": "status"})


def peer_of(lab: Lab, node: str, iface: str) -> str:
    interface = next(i for i in lab.plan.node(node).interfaces if i.name == iface)
    peer = lab.plan.node(interface.peer.node)
    return next(i for i in peer.interfaces if i.name == interface.peer.iface).ipv4.split("/")[0]


def own_addresses(lab: Lab, node: str) -> set[str]:
    plan = lab.plan.node(node)
    return {plan.loopback4} | {i.ipv4.split("/")[0] for i in plan.interfaces}


def transit_ping(lab: Lab, target: str = "10.78.0.1") -> str:
    """One echo from host1 to `target`, routed by host1 to leaf1 (a transit packet there)."""
    host1 = lab.node("host1")
    uplink = next(i for i in lab.plan.node("host1").interfaces if i.peer.node == "leaf1")
    gateway = peer_of(lab, "host1", uplink.name)
    source = lab.plan.node("host1").loopback4  # what the spine's ICMP error can route back to
    host1.cmd("ip", "route", "replace", f"{target}/32", "via", gateway, "src", source, check=True)
    try:
        return host1.cmd("ping", "-n", "-c", "1", "-W", "2", target).stdout
    finally:
        host1.cmd("ip", "route", "del", f"{target}/32")


def answered_by(lab: Lab, reply: str, node: str) -> bool:
    """Did the ICMP error in `reply` ('From A icmp_seq=1 ...') come from `node`?"""
    match = re.search(r"^From ([0-9.]+)", reply, re.M)
    return bool(match) and match[1] in own_addresses(lab, node)


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    lab = deploy(TOPOLOGIES / "sai-fabric.yml", name=NAME, runtime=RUNTIME, timeout=120)
    try:
        yield lab
    finally:
        lab.destroy()


def test_fpm_routes_reach_the_sai_table_and_forward(lab: Lab) -> None:
    expected = reachable_origins(lab.plan)
    for switch in SWITCHES:
        fib = table(lab, switch, SAI_TABLE)
        others = {lab.plan.node(o).loopback4 for o in expected[switch]}
        assert others and all(f"{lo} nhid" in fib for lo in others), (switch, fib)
        assert "proto 250" in fib
        rules = lab.node(switch).cmd("ip", "rule").stdout.splitlines()
        assert [r.split(":")[0] for r in rules] == ["0", "999", "1000", "32767"], rules
        assert "iif lo lookup main" in rules[1] and f"lookup {SAI_TABLE}" in rules[2]
        status = agent(lab, switch)
        assert status["fpm_connected"] and status["state"] == "running", status
    for family in ("loopback4", "loopback6"):
        target = getattr(lab.plan.node("host2"), family)
        out = lab.node("host1").cmd("ping", "-c", "2", "-i", "0.2", "-W", "2", target)
        assert out.returncode == 0, out.stdout


def test_a_route_withdrawn_in_frr_leaves_the_dataplane(lab: Lab) -> None:
    frr, via = lab.frr("leaf1"), peer_of(lab, "leaf1", "eth1")
    frr.vtysh("configure terminal", f"ip route 10.77.0.0/24 {via}")
    wait_for("the static route in the SAI table",
             lambda: f"via {via}" in table(lab, "leaf1", SAI_TABLE, "10.77.0.0/24"))
    frr.vtysh("configure terminal", f"no ip route 10.77.0.0/24 {via}")
    wait_for("the withdrawal", lambda: table(lab, "leaf1", SAI_TABLE, "10.77.0.0/24") == "")
    trace = agent(lab, "leaf1", {"cmd": "trace", "lines": 200})
    assert any(line.split()[1:3] == ["remove", "SAI_OBJECT_TYPE_ROUTE_ENTRY"]
               and "10.77.0.0/24" in line for line in trace), trace[-5:]


def test_sai_faults_degrade_the_node_and_main_never_forwards(lab: Lab) -> None:
    """... and the agent's alarms are in the lab's event record, each raised and cleared."""
    began = time.time()
    frr, via = lab.frr("leaf1"), peer_of(lab, "leaf1", "eth1")
    out = labctl("sai", f"{NAME}/leaf1", "fault", "fail", "create", "--type", "ROUTE_ENTRY",
                 "--rate", "1")
    assert out.returncode == 0, out.stderr
    try:
        frr.vtysh("configure terminal", f"ip route 10.78.0.0/24 {via}")
        wait_for("zebra's own copy in main", lambda: table(lab, "leaf1", "main", "10.78.0.0/24"))
        wait_for("the agent to report the failure",
                 lambda: "10.78.0.0/24" in agent(lab, "leaf1")["routes_failed"])
        assert table(lab, "leaf1", SAI_TABLE, "10.78.0.0/24") == ""
        # A transit packet from host1 reaches leaf1 and finds no route (zebra's copy in main is
        # not used for it): leaf1 itself answers Net Unreachable.
        assert "Unreachable" in (reply := transit_ping(lab)) and answered_by(lab, reply, "leaf1")
        own = lab.node("leaf1").cmd("ip", "route", "get", "10.78.0.1")
        assert f"via {via}" in own.stdout  # the switch's own traffic does use zebra's table
        rows = {r["node"]: r for r in json.loads(labctl("inspect", NAME, "--json").stdout)["nodes"]}
        assert rows["leaf1"]["state"] == "degraded" and "not programmed" in rows["leaf1"]["sai"]
        assert rows["leaf1"]["bgp_up"] == rows["leaf1"]["bgp_total"] > 0  # FRR stays up
        assert rows["leaf2"]["state"] == "running"
        wait_for("the failure in the trace file (written once a second)",
                 lambda: "injected fault" in (lab.frr("leaf1").workdir / "sai.log").read_text())
    finally:
        assert labctl("sai", f"{NAME}/leaf1", "fault", "clear").returncode == 0
    wait_for("the retry", lambda: f"via {via}" in table(lab, "leaf1", SAI_TABLE, "10.78.0.0/24"))
    # Programmed now: the same packet is forwarded, and the spine (which has no such route)
    # is the one that answers.
    spine = next(i.peer.node for i in lab.plan.node("leaf1").interfaces if i.name == "eth1")
    assert answered_by(lab, transit_ping(lab), spine)
    count = agent(lab, "leaf1")["routes_programmed"]
    assert labctl("sai", f"{NAME}/leaf1", "fault", "shrink", "routes", str(count)).returncode == 0
    try:
        frr.vtysh("configure terminal", f"ip route 10.79.0.0/24 {via}")
        wait_for("TABLE_FULL", lambda: agent(lab, "leaf1")["routes_failed"].get("10.79.0.0/24")
                 == "SAI_STATUS_TABLE_FULL")
        assert agent(lab, "leaf1")["state"] == "degraded"
    finally:
        labctl("sai", f"{NAME}/leaf1", "fault", "clear")
        frr.vtysh("configure terminal", f"no ip route 10.78.0.0/24 {via}",
                  f"no ip route 10.79.0.0/24 {via}")
    wait_for("a healthy agent", lambda: agent(lab, "leaf1")["state"] == "running")
    for prefix in ("10.78.0.0/24", "10.79.0.0/24"):  # gone everywhere before the next test
        wait_for(f"{prefix} withdrawn", lambda p=prefix: not table(lab, "leaf1", "main", p)
                 and not table(lab, "leaf1", SAI_TABLE, p))
    alarms = [e for e in read(lab.dir) if e.t >= began and e.kind == "alarm"]
    assert {(e.node, e.detail["by"]) for e in alarms} == {("leaf1", "agent")}
    said: dict[str, list[str]] = {}
    for e in alarms:
        said.setdefault(e.detail["alarm"], []).append(e.what)
    assert said["faults"] == said["capacity"] == ["raised", "cleared"], said
    assert said["routes"] == ["raised", "cleared"] * (len(said["routes"]) // 2) != [], said
    first = {key: next(e.t for e in alarms if e.detail["alarm"] == key) for key in said}
    assert first["faults"] <= first["routes"] < first["capacity"], first


def test_warm_restart_keeps_traffic_and_writes_nothing(lab: Lab) -> None:
    target = lab.plan.node("host2").loopback4
    monitor = lab.node("leaf1").popen(["ip", "monitor", "route", "nexthop"],
                                      stdout=subprocess.PIPE, text=True)
    ping = lab.node("host1").popen(["ping", "-q", "-i", "0.01", "-c", "700", "-W", "1", target],
                                   stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(1)
        for switch in ("leaf1", "spine1"):
            out = labctl("sai", f"{NAME}/{switch}", "--json", "restart")
            assert out.returncode == 0, out.stderr
            pids = json.loads(out.stdout)
            assert pids["old_pid"] and pids["new_pid"] != pids["old_pid"]
        summary = ping.communicate(timeout=30)[0]
    finally:
        monitor.terminate()
    assert " 700 received, 0% packet loss" in summary, summary
    for switch in ("leaf1", "spine1"):
        wait_for(f"{switch} replay", lambda s=switch: agent(lab, s)["fpm_connected"]
                 and not agent(lab, s)["replaying"], timeout=30)
        status = agent(lab, switch)
        assert status["stale_swept"] == 0 and status["routes_failed_total"] == 0, status
        assert status["unchanged_skipped"] >= status["routes_programmed"] > 0, status
        assert status["sai_calls"] < 3 * status["routes_programmed"], status  # no re-programming
    changes = monitor.communicate()[0]
    assert "proto 250" not in changes and "Deleted" not in changes, changes


def headroom_document(lab: Lab, prefixes: list[str]) -> dict:
    """leaf1's ports, a lossless buffer profile on eth1's priority group 3, a DSCP map, and
    `prefixes` routed through spine2 only (eth2) by the configuration."""
    via_spine2 = peer_of(lab, "leaf1", "eth2")
    return {
        "PORT|eth1": {"SAI_PORT_ATTR_SPEED": 400_000,
                      "SAI_PORT_ATTR_QOS_DSCP_TO_TC_MAP": "QOS_MAP|rdma"},
        "BUFFER_POOL|ingress": {"SAI_BUFFER_POOL_ATTR_TYPE": "SAI_BUFFER_POOL_TYPE_INGRESS",
                                "SAI_BUFFER_POOL_ATTR_SIZE": 33_554_432},
        "BUFFER_PROFILE|lossless": {"SAI_BUFFER_PROFILE_ATTR_POOL_ID": "BUFFER_POOL|ingress",
                                    "SAI_BUFFER_PROFILE_ATTR_RESERVED_BUFFER_SIZE": 19_456,
                                    "SAI_BUFFER_PROFILE_ATTR_XOFF_TH": 160_000,
                                    "SAI_BUFFER_PROFILE_ATTR_XON_TH": 19_456},
        "INGRESS_PRIORITY_GROUP|eth1-3": {
            "SAI_INGRESS_PRIORITY_GROUP_ATTR_PORT": "PORT|eth1",
            "SAI_INGRESS_PRIORITY_GROUP_ATTR_INDEX": 3,
            "SAI_INGRESS_PRIORITY_GROUP_ATTR_BUFFER_PROFILE": "BUFFER_PROFILE|lossless"},
        "QOS_MAP|rdma": {"SAI_QOS_MAP_ATTR_TYPE": "SAI_QOS_MAP_TYPE_DSCP_TO_TC",
                         "SAI_QOS_MAP_ATTR_MAP_TO_VALUE_LIST": [[26, 3], [48, 6]]},
        "NEXT_HOP|spine2": {"SAI_NEXT_HOP_ATTR_TYPE": "SAI_NEXT_HOP_TYPE_IP",
                            "SAI_NEXT_HOP_ATTR_IP": via_spine2,
                            "SAI_NEXT_HOP_ATTR_ROUTER_INTERFACE_ID": "ROUTER_INTERFACE|eth2"},
        **{f"ROUTE_ENTRY|{p}": {"SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID": "NEXT_HOP|spine2"}
           for p in prefixes}}


def test_the_configuration_channel_reaches_the_kernel_and_survives_a_restart(lab: Lab) -> None:
    """The issue's bar: a change to a running switch's document reaches the kernel (and real
    transit packets), survives `labctl sai NODE restart` with nothing written to the kernel,
    owns its prefixes over zebra's updates, and hands them back when it lets go."""
    path = lab.node_dir("leaf1") / "sai-config.json"
    rendered = path.read_text()
    host2 = f"{lab.plan.node('host2').loopback4}/32"
    via_spine2 = f"via {peer_of(lab, 'leaf1', 'eth2')} dev eth2"
    try:
        path.write_text(json.dumps(headroom_document(lab, ["10.78.0.0/24", host2]), indent=1))
        planned = labctl("sai", f"{NAME}/leaf1", "apply", "--dry-run")
        assert planned.returncode == 0 and "create ROUTE_ENTRY|10.78.0.0/24" in planned.stdout
        assert not table(lab, "leaf1", SAI_TABLE, "10.78.0.0/24")
        applied = labctl("sai", f"{NAME}/leaf1", "apply")
        assert applied.returncode == 0, applied.stdout + applied.stderr
        assert f"create ROUTE_ENTRY|{host2} (over zebra's route)" in applied.stdout
        assert via_spine2 in table(lab, "leaf1", SAI_TABLE, "10.78.0.0/24")
        assert answered_by(lab, transit_ping(lab, "10.78.0.1"), "spine2")
        assert table(lab, "leaf1", SAI_TABLE, host2).strip().endswith(via_spine2 + " proto 250")

        monitor = lab.node("leaf1").popen(["ip", "monitor", "route", "nexthop"],
                                          stdout=subprocess.PIPE, text=True)
        try:
            assert labctl("sai", f"{NAME}/leaf1", "restart").returncode == 0
            wait_for("leaf1's replay", lambda: agent(lab, "leaf1")["fpm_connected"]
                     and not agent(lab, "leaf1")["replaying"], timeout=30)
        finally:
            monitor.terminate()
        changes = monitor.communicate()[0]
        assert "proto 250" not in changes and "Deleted" not in changes, changes
        dump = agent(lab, "leaf1", {"cmd": "dump"})
        profile = dump["SAI_OBJECT_TYPE_BUFFER_PROFILE"][0]
        assert profile["SAI_BUFFER_PROFILE_ATTR_XOFF_TH"] == 160_000
        assert len(dump["SAI_OBJECT_TYPE_INGRESS_PRIORITY_GROUP"]) == 1
        assert dump["SAI_OBJECT_TYPE_QOS_MAP"][0]["SAI_QOS_MAP_ATTR_MAP_TO_VALUE_LIST"] == [
            [26, 3], [48, 6]]
        status = agent(lab, "leaf1")
        assert status["port_speeds"] == {"eth1": 400_000, "eth2": 100_000, "eth3": 100_000}
        assert status["config"] == {"objects": 8, "failed": {}}, status["config"]
        assert via_spine2 in table(lab, "leaf1", SAI_TABLE, "10.78.0.0/24")
        row = next(r for r in lab_status(lab) if r["node"] == "leaf1")
        assert "ports 1x400G 2x100G" in row["sai"], row

        # zebra's news on a configured prefix is kept back: eth1 down moves its route
        overridden = status["routes_overridden"]
        lab.node("leaf1").cmd("ip", "link", "set", "eth1", "down", check=True)
        try:
            wait_for("zebra's update of host2's route", lambda: agent(
                lab, "leaf1")["routes_overridden"] > overridden)
            assert table(lab, "leaf1", SAI_TABLE, host2).strip().endswith(
                via_spine2 + " proto 250")
        finally:
            lab.node("leaf1").cmd("ip", "link", "set", "eth1", "up", check=True)
            wait_converged(lab, 60)

        path.write_text(json.dumps(headroom_document(lab, []), indent=1))
        let_go = labctl("sai", f"{NAME}/leaf1", "apply")
        assert let_go.returncode == 0 and f"remove ROUTE_ENTRY|{host2}" in let_go.stdout
        assert not table(lab, "leaf1", SAI_TABLE, "10.78.0.0/24")
        wait_for("zebra's ECMP back for host2", lambda: {"dev eth1", "dev eth2"} <= set(
            re.findall(r"dev eth\d", table(lab, "leaf1", SAI_TABLE, host2))))

        path.write_text('{"PORT|eth1": {"SAI_PORT_ATTR_SPEED": 400000},\n "QOS_MAP|x": 3}')
        refused = labctl("sai", f"{NAME}/leaf1", "apply")
        assert refused.returncode != 0 and f"{path}:2: QOS_MAP|x" in refused.stderr, refused
        assert agent(lab, "leaf1")["config"]["objects"] == 6
        # a restart with the bad document on disk keeps what was applied last, and says so
        assert labctl("sai", f"{NAME}/leaf1", "restart").returncode == 0
        status = agent(lab, "leaf1")
        assert status["config"]["objects"] == 6, status["config"]
        assert "configuration document refused (see agent.log)" in status["reasons"], status
        assert status["port_speeds"]["eth1"] == 400_000
    finally:
        path.write_text(rendered)
        assert labctl("sai", f"{NAME}/leaf1", "apply").returncode == 0
    assert agent(lab, "leaf1")["port_speeds"]["eth1"] == 100_000


def test_a_crashed_switch_comes_back_as_a_sai_switch(lab: Lab) -> None:
    """After a crash the switch restarts with FPM and its agent: a route added in FRR after
    the restart reaches the SAI table, and inspect shows the agent healthy."""
    old = agent(lab, "leaf1")["pid"]
    faults = Faults(lab)
    faults.node_crash("leaf1")
    with pytest.raises(LabError):
        agent(lab, "leaf1")
    faults.undo_all()
    wait_converged(lab, 60)
    status = agent(lab, "leaf1")
    assert status["pid"] != old and status["fpm_connected"], status
    frr, via = lab.frr("leaf1"), peer_of(lab, "leaf1", "eth1")
    frr.vtysh("configure terminal", f"ip route 10.79.0.0/24 {via}")
    try:
        wait_for("a route added after the restart in the SAI table",
                 lambda: f"via {via}" in table(lab, "leaf1", SAI_TABLE, "10.79.0.0/24"))
    finally:
        frr.vtysh("configure terminal", f"no ip route 10.79.0.0/24 {via}")
    row = next(r for r in lab_status(lab) if r["node"] == "leaf1")
    assert row["kind"] == "sai" and row["state"] == "running", row
    assert re.fullmatch(r"\d+ routes; ports 3x100G", row["sai"]), row
    assert row["daemons_down"] == [], row


def test_labctl_sai_dump_counters_trace(lab: Lab) -> None:
    out = labctl("sai", f"{NAME}/leaf1", "--json", "dump", "--type", "ROUTE_ENTRY")
    routes = json.loads(out.stdout)["SAI_OBJECT_TYPE_ROUTE_ENTRY"]
    assert any(lab.plan.node("host2").loopback4 in r["id"] for r in routes)
    counters = json.loads(labctl("sai", f"{NAME}/leaf1", "--json", "counters").stdout)
    assert {c["name"] for c in counters} == {"eth1", "eth2", "eth3"}
    assert all(c["stats"]["SAI_PORT_STAT_IF_OUT_UCAST_PKTS"] > 0 for c in counters)
    out = labctl("sai", f"{NAME}/leaf1", "dump")
    assert "SAI_OBJECT_TYPE_NEXT_HOP_GROUP_MEMBER" in out.stdout and "WEIGHT=1" in out.stdout
    assert " create SAI_OBJECT_TYPE_" in labctl("sai", f"{NAME}/spine1", "trace").stdout
    out = labctl("sai", f"{NAME}/host1", "dump")
    assert out.returncode == 2 and "not sai" in out.stderr


def test_destroy_ends_every_agent(lab: Lab) -> None:
    marker = f"{lab.dir}/"
    lab.destroy()
    assert not [n for n in list_netns() if n.startswith(lab_netns_prefix(NAME))]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        assert marker not in cmdline, cmdline
