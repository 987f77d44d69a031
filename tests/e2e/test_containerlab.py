"""containerlab labs run as they are (tests/labs/): an OSPF triangle with PCs (groups, binds,
env), a leaf-spine with eBGP unnumbered (defaults, kinds, folder binds) and a numbered eBGP
Clos of containerlab's kind frr with alpine-style hosts and a bridge. Every pair of hosts
must reach each other; the labs' own commands must not touch the host."""

from __future__ import annotations

import itertools
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cli.lifecycle import saved_configs
from harness.deploy.lab import Lab
from harness.deploy.lab import deploy as deploy_lab
from harness.faults.evidence import node_state
from harness.testing.chaos import labctl
from harness.testing.plugin import RUNTIME
from harness.topology.pipeline import plan_from_file
from tests.conftest import TOPOLOGIES

pytestmark = pytest.mark.e2e
LABS = Path(__file__).parent.parent / "labs"
# Routes follow the neighbours the deploy waited for: eBGP with MRAI 0 (`frr defaults
# datacenter`) sends them at once. OSPF may still owe LSAs when its adjacencies are Full: a
# router LSA's re-origination waits up to 5 s (`timers throttle lsa all`), and an LS request
# or update the neighbour did not answer is resent by FRR 8.4's per-neighbour timers, which
# tick every RxmtInterval (5 s) and skip an LSA younger than one interval: 5 to 10 s after
# it was flooded (`debug ospf lsa flooding` shows both in this lab). SPF then runs within its
# 50 ms hold. A probe that fails costs its full 1 s wait (`ping -W1`), so a route that
# appears just after a probe starts is seen up to 1 s late; 0.5 s covers SPF and starting
# the probes. Measured after deploy (51 deploys): every route in place after 0.5-0.8 s,
# 3.8-5.7 s or, once, 9.7 s; the three databases agree after 4.6 s or 9.6-9.8 s.
PROBE_S = 1.0
BGP_ROUTES_S = 3.0
RXMT_S = 5.0
OSPF_ROUTES_S = 2 * RXMT_S + PROBE_S + 0.5


def deploy(path: Path, node_filter: list[str] | None = None, name: str | None = None) -> Lab:
    return deploy_lab(path, name=name, node_filter=node_filter, runtime=RUNTIME, timeout=60)


@pytest.fixture(scope="module")
def triangle() -> Iterator[Lab]:
    lab = deploy(LABS / "ospf-triangle" / "ospf-triangle.clab.yml")
    yield lab
    lab.destroy()


@pytest.fixture(scope="module")
def unnumbered() -> Iterator[Lab]:
    lab = deploy(LABS / "bgp-unnumbered" / "bgp-unnumbered.clab.yml")
    yield lab
    lab.destroy()


@pytest.fixture(scope="module")
def numbered() -> Iterator[Lab]:
    lab = deploy(LABS / "numbered-clos" / "numbered-clos.clab.yml")
    yield lab
    lab.destroy()


def ping_within(lab: Lab, src: str, dst: str, seconds: float) -> float:
    """Seconds until `src` first reaches `dst` (one 1 s probe after another), counted to the
    start of the probe that got through. The failed probe before it cost its wait and its own
    start (a `docker exec` takes a tenth of a second or more on a loaded host); the probe that
    got through is timed, and its time is that start's measure."""
    start = time.monotonic()
    while True:
        began = time.monotonic()
        out = lab.runtime.run(src, ["ping", "-c1", f"-W{PROBE_S:.0f}", dst], timeout=10)
        reached = began - start
        if out.returncode == 0:
            probe = time.monotonic() - began
            assert reached < seconds + probe, \
                f"{src} -> {dst} reached after {reached:.2f} s (bound {seconds} s + {probe:.2f} s)"
            return reached
        assert reached < 2 * seconds, f"{src} -> {dst} not reachable: {out.stdout}"


def all_pairs_reach(lab: Lab, hosts: dict[str, str], seconds: float) -> None:
    for src, dst in itertools.permutations(hosts, 2):
        ping_within(lab, src, hosts[dst], seconds)


def test_ospf_triangle_hosts_reach_each_other(triangle: Lab) -> None:
    all_pairs_reach(triangle, {f"pc{i}": f"192.168.{i}.10" for i in (1, 2, 3)}, OSPF_ROUTES_S)
    rows = json.loads(labctl("inspect", "ospftri", "--format", "json").stdout)["nodes"]
    ospf = {r["node"]: r.get("ospf") for r in rows}
    assert ospf == {"r1": "2/2", "r2": "2/2", "r3": "2/2", "pc1": None, "pc2": None,
                    "pc3": None}


def test_evidence_holds_the_ospf_state_of_a_router_that_runs_ospfd(triangle: Lab) -> None:
    """What a failed OSPF test needs the next morning: each adjacency and the database, and
    nothing asked of daemons the router does not run."""
    frr = node_state(triangle, "r1")["frr"]
    assert set(frr) == {"routes4", "routes6", "ospf_neighbours", "ospf_database"}
    adjacencies = frr["ospf_neighbours"]["neighbors"]
    assert {rid: [n["nbrState"] for n in entries] for rid, entries in adjacencies.items()} == \
        {"2.2.2.2": ["Full/-"], "3.3.3.3": ["Full/-"]}
    routers = frr["ospf_database"]["areas"]["0.0.0.0"]["routerLinkStates"]
    assert sorted(lsa["advertisedRouter"] for lsa in routers) == ["1.1.1.1", "2.2.2.2", "3.3.3.3"]


def test_binds_env_and_sandbox_on_the_node(triangle: Lab) -> None:
    node_config = (LABS / "ospf-triangle" / "r2" / "frr.conf").read_text()
    out = labctl("exec", "ospftri/r2", "--", "cat", "/etc/frr/frr.conf")
    assert out.stdout == node_config
    out = labctl("exec", "ospftri/r2", "--", "sh", "-c", "echo x >> /etc/frr/daemons")
    assert out.returncode != 0 and "Read-only" in out.stderr  # bound with :ro
    host_daemons = Path("/etc/frr/daemons").read_bytes()
    out = labctl("exec", "ospftri/pc1", "--", "sh", "-c",
                 "touch /etc/fabric-lab-probe; sysctl -w kernel.hostname=x; "
                 "echo $NET.$SITE; sysctl -w net.ipv4.ip_forward=1")
    assert "192.168.1" in out.stdout and "kernel.hostname" in out.stderr
    # netns: the node's own /proc/sys/net is writable; docker keeps /proc/sys read-only
    # (the file's `sysctls` key sets them there)
    assert ("net.ipv4.ip_forward = 1" in out.stdout) == (RUNTIME == "netns"), out
    assert not Path("/etc/fabric-lab-probe").exists()
    assert Path("/etc/frr/daemons").read_bytes() == host_daemons
    out = labctl("exec", "ospftri/r1", "--", "vtysh", "-c", "show ip ospf neighbor json")
    assert len(json.loads(out.stdout)["neighbors"]) == 2  # the node's ospfd, not the host's


def test_unnumbered_fabric_and_save_beside_the_topology(unnumbered: Lab) -> None:
    all_pairs_reach(unnumbered, {"srv1": "10.10.1.10", "srv2": "10.10.2.10"}, BGP_ROUTES_S)
    states = unnumbered.frr("leaf1").show_json("bgpd", "show bgp neighbors")
    assert {p: s["bgpState"] for p, s in states.items()} == {"eth1": "Established",
                                                              "eth2": "Established"}
    folder = saved_configs(unnumbered.plan)
    try:
        out = labctl("save", "-t", str(LABS / "bgp-unnumbered" / "bgp-unnumbered.clab.yml"))
        assert out.returncode == 0, out.stderr
        assert "neighbor eth1 interface" in (folder / "leaf1" / "frr.conf").read_text()
        assert not (folder / "srv1").exists()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_numbered_clos_bridge_and_refused_lines(numbered: Lab) -> None:
    hosts = {"h1": "192.168.1.10", "h2": "192.168.2.10", "h3a": "192.168.3.10",
             "h3b": "192.168.3.11"}
    all_pairs_reach(numbered, hosts, BGP_ROUTES_S)
    assert numbered.frr("leaf3").refused() == [
        "line 23: % Unknown command[25]:  bgp ipv6-auto-ra"]
    rows = {r["node"]: r for r in json.loads(
        labctl("inspect", "numclos", "--json").stdout)["nodes"]}
    assert rows["leaf3"]["refused_lines"] == 1 and rows["leaf1"]["refused_lines"] == 0
    assert (rows["spine1"]["bgp_up"], rows["spine1"]["bgp_total"]) == (3, 3)
    assert rows["h2"]["state"] == "running"  # its cmd runs


def test_exec_by_label_and_exit_codes(numbered: Lab) -> None:
    out = labctl("exec", "--name", "numclos", "--label", "clab-node-kind=linux", "--cmd",
                 "ip -4 -o address show dev eth1")
    assert out.returncode == 0, out.stderr
    assert all(f"inet {a}/24" in out.stdout for a in ("192.168.1.10", "192.168.3.11"))
    assert "spine1" not in out.stdout
    assert labctl("exec", "-t", str(LABS / "numbered-clos" / "numbered-clos.clab.yml"),
                  "--cmd", "exit 3").returncode == 1  # a check failed
    assert labctl("exec", "--name", "numclos", "--label", "nolabel", "--cmd",
                  "true").returncode == 2  # usage


def test_node_filter_deploys_a_subset() -> None:
    lab = deploy(LABS / "numbered-clos" / "numbered-clos.clab.yml",
                 ["spine1", "leaf1", "leaf2", "h1", "h2"], name="numclossub")
    try:
        assert sorted(lab.node_names) == ["h1", "h2", "leaf1", "leaf2", "spine1"]
        assert sum("not in --node-filter" in n for n in lab.plan.notes) == 7
        all_pairs_reach(lab, {"h1": "192.168.1.10", "h2": "192.168.2.10"}, BGP_ROUTES_S)
    finally:
        lab.destroy()


def test_export_round_trip_keeps_reachability(tmp_path: Path) -> None:
    folder = tmp_path / "exported"
    out = labctl("export", "-t", str(TOPOLOGIES / "clos.yml"), "-o", str(folder))
    assert out.returncode == 0, out.stderr
    source = plan_from_file(TOPOLOGIES / "clos.yml")
    lab = deploy(folder / "clos.clab.yml", name="cloexp")
    try:
        hosts = {n.name: n.loopback4 for n in source.nodes if n.role and
                 n.role.value == "host"}
        all_pairs_reach(lab, hosts, BGP_ROUTES_S)
    finally:
        lab.destroy()
    manifest = folder / "k8s"
    assert labctl("export", "-t", str(TOPOLOGIES / "clos.yml"), "--format", "clabernetes",
                  "-o", str(manifest)).returncode == 0
    text = (manifest / "clos.clabernetes.yaml").read_text()
    assert "kind: Topology" in text and text.count("kind: ConfigMap") == len(source.nodes)


def test_a_neighbour_that_never_comes_up_is_named(tmp_path: Path) -> None:
    (tmp_path / "r1.conf").write_text("router bgp 65001\n neighbor 10.9.9.9 remote-as 65002\n"
                                      " neighbor eth1 interface remote-as external\n")
    (tmp_path / "lab.clab.yml").write_text(
        "name: clabdown\ntopology:\n  nodes:\n    r1: {kind: frr, startup-config: r1.conf}\n"
        "    r2: {kind: linux}\n  links:\n    - endpoints: [r1:eth1, r2:eth1]\n")
    out = labctl("deploy", "-t", str(tmp_path / "lab.clab.yml"), "--timeout", "3")
    try:
        assert out.returncode == 1, out  # built, but a check failed: the lab is kept
        assert "r1: bgp neighbour 10.9.9.9 not up" in out.stderr
        assert "r1: bgp neighbour eth1 not up" in out.stderr
        rows = json.loads(labctl("inspect", "clabdown", "--json").stdout)["nodes"]
        assert rows[0]["neighbours_down"] == "bgp 10.9.9.9, bgp eth1"
    finally:
        assert labctl("destroy", "clabdown").returncode == 0
