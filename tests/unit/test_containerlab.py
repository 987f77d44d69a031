"""containerlab's topology semantics: env expansion, merge order, binds, FRR images, the
neighbours a user's config declares, the keys reported as ignored, --node-filter, export."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.errors import TopologyError
from harness.nodes.neighbours import Neighbour, is_up, parse
from harness.topology.augment import augment
from harness.topology.binds import bound_file, parse_bind
from harness.topology.envsubst import expand
from harness.topology.export import (
    IMAGES_TARBALL,
    IMPAIRMENTS_SCRIPT,
    export_clab,
    impairments_script,
    in_registry,
    left_behind,
    load_script,
    used_images,
)
from harness.topology.frr_image import (
    FRR_STARTS,
    daemons_for_config,
    daemons_from_file,
    is_frr_image,
    log_paths_in_lab,
)
from harness.topology.loader import load_text
from harness.topology.pipeline import plan_from_file
from harness.topology.schema import Kind
from tests.conftest import TOPOLOGIES

LABS = Path(__file__).parent.parent / "labs"


def test_env_expands_as_containerlab_does() -> None:
    env = {"SET": "x", "EMPTY": ""}
    text = "${SET} ${UNSET} ${UNSET:=d1} ${EMPTY:-d2} ${EMPTY-d3} ${SET:=no} $SET ${SET}y"
    assert expand(text, env, "f") == "x  d1 d2  x $SET xy"


@pytest.mark.parametrize("bad", ["${1X}", "${X:?oops}", "${X", "${}"])
def test_bad_env_reference_is_an_error_at_its_line(bad: str) -> None:
    with pytest.raises(TopologyError) as caught:
        expand(f"name: a\n\nx: {bad}\n", {}, "lab.yml")
    [problem] = caught.value.problems
    assert (problem.file, problem.line) == ("lab.yml", 3) and "${" in problem.fix


def test_layers_merge_in_containerlab_order(tmp_path: Path) -> None:
    for name in ("d", "k", "g", "n"):
        (tmp_path / name).write_text(name)
    (tmp_path / "lab.yml").write_text("""
name: m
topology:
  defaults: {kind: linux, image: d, env: {A: d, B: d}, labels: {l: d}, exec: [d],
             binds: ["d:/x", "d:/only-defaults"], group: g1}
  kinds:
    linux: {image: k, env: {B: k}, exec: [k], binds: ["k:/x"]}
  groups:
    g1: {env: {C: g}, exec: [g], binds: ["g:/x:ro"]}
    g2: {kind: bridge}
  nodes:
    a: {exec: [n], labels: {l: n}, binds: ["n:/y"]}
    b: {group: g2}
""")
    plan = plan_from_file(tmp_path / "lab.yml")
    a, b = plan.node("a"), plan.node("b")
    assert (a.kind, a.image, a.group) == (Kind.linux, "k", "g1")
    assert a.env == {"A": "d", "B": "k", "C": "g"} and a.labels == {"l": "n"}
    assert a.exec == ["d", "k", "g", "n"]
    binds = {b.target: (Path(b.source).name, b.read_only) for b in a.binds}
    assert binds == {"/x": ("g", True), "/only-defaults": ("d", False), "/y": ("n", False)}
    assert (b.kind, b.group) == (Kind.bridge, "g2")  # the group's kind beats the defaults'


def test_bind_sources_and_frr_files_through_a_folder(tmp_path: Path) -> None:
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "frr.conf").write_text("router ospf\n")
    folder = parse_bind("r1:/etc/frr", tmp_path)
    assert bound_file([folder], "/etc/frr/frr.conf") == tmp_path / "r1" / "frr.conf"
    assert bound_file([folder], "/etc/frr/daemons") is None
    own = parse_bind("r1/frr.conf:/etc/frr/frr.conf:ro", tmp_path)
    assert own.read_only and bound_file([folder, own], "/etc/frr/frr.conf") == Path(own.source)
    for bad in ("nothing-here:/x", "r1:relative", "r1:/x:rx", "r1"):
        with pytest.raises(ValueError):
            parse_bind(bad, tmp_path)


def test_frr_images_daemons_and_starts(tmp_path: Path) -> None:
    assert all(map(is_frr_image, ["frrouting/frr:v8.4.0", "quay.io/frrouting/frr:9.1.0",
                                  "fabric-lab/switch:abc"]))
    assert not any(map(is_frr_image, ["alpine:3", "ghcr.io/x/frrouting/frr", None]))
    daemons = tmp_path / "daemons"
    daemons.write_text("bgpd=yes\nospfd=no\nbfdd=yes # BFD\nbgpd_options=yes\nvtysh_enable=yes\n")
    assert daemons_from_file(daemons) == ["zebra", "bgpd", "bfdd"]
    daemons.write_text("nosuchd=yes\n")
    with pytest.raises(ValueError, match="nosuchd"):
        daemons_from_file(daemons)
    config = "interface eth1\n ip ospf area 0\nrouter bgp 1\n neighbor x bfd \n"
    assert daemons_for_config(config) == ["zebra", "staticd", "bgpd", "ospfd", "bfdd"]
    assert FRR_STARTS.search("/usr/lib/frr/frrinit.sh start") and FRR_STARTS.search("vtysh -b")
    assert not FRR_STARTS.search("vtysh -c 'show ip route'")
    moved = log_paths_in_lab("log file /etc/frr/x.log informational\n", Path("/lab/log"))
    assert moved == "log file /lab/log/x.log informational\n"


def test_declared_neighbours() -> None:
    config = parse("""router bgp 65001
 neighbor FABRIC peer-group
 neighbor FABRIC remote-as external
 neighbor eth1 interface peer-group FABRIC
 neighbor 10.0.0.1 remote-as 65002
 neighbor 10.0.0.3 peer-group FABRIC
 neighbor 10.0.0.5 remote-as 65003
 neighbor 10.0.0.5 shutdown
exit
router bgp 65001 vrf red
 neighbor 10.9.9.9 remote-as 1
exit
interface eth2
 ip ospf area 0
interface eth3
 ip ospf area 0
 ip ospf passive
router ospf
 network 10.1.0.0/16 area 0
 passive-interface eth5
router ospf6
 interface eth4 area 0.0.0.0
""")
    assert config.bgp == {"eth1", "10.0.0.1", "10.0.0.3"}
    assert config.runs("ospf", "eth2", []) and not config.runs("ospf", "eth3", [])
    from ipaddress import IPv4Interface
    assert config.runs("ospf", "eth9", [IPv4Interface("10.1.2.3/24")])
    assert not config.runs("ospf", "eth5", [IPv4Interface("10.1.2.3/24")])
    assert config.runs("ospf6", "eth4", []) and not config.runs("ospf6", "eth2", [])
    answers = {"bgp": {"eth1": {"bgpState": "Established"}, "10.0.0.1": {"bgpState": "Active"}},
               "ospf": {"neighbors": {"2.2.2.2": [{"ifaceName": "eth2:10.1.0.1",
                                                   "nbrState": "Full/DR"}]}},
               "ospf6": {"neighbors": [{"interfaceName": "eth4", "state": "Init"}]}}
    up = [n.peer for n in (Neighbour("r", "bgp", "eth1"), Neighbour("r", "bgp", "10.0.0.1"),
                           Neighbour("r", "ospf", "eth2"), Neighbour("r", "ospf6", "eth4"))
          if is_up(n, answers)]
    assert up == ["eth1", "eth2"]


def test_shipped_containerlab_labs_plan_as_user_configured() -> None:
    plan = plan_from_file(LABS / "ospf-triangle" / "ospf-triangle.clab.yml",
                   node_filter=["r1", "r2", "pc1"])
    r1 = plan.node("r1")
    assert (r1.kind, r1.role, r1.daemons) == (Kind.frr, None, ["zebra", "ospfd"])
    assert r1.frr_config and r1.frr_config.endswith("r1/frr.conf")
    assert all(i.ipv4 is None for i in r1.interfaces) and not plan.sessions
    assert [n.name for n in plan.nodes] == ["r1", "r2", "pc1"]
    assert any("skipped: r3 is not in --node-filter" in n for n in plan.notes)
    assert any(n.startswith("mgmt-ipv4 ignored") and n.endswith("r2") for n in plan.notes)
    numbered = plan_from_file(LABS / "numbered-clos" / "numbered-clos.clab.yml")
    assert numbered.node("spine1").daemons == ["zebra", "bgpd", "staticd"]
    assert numbered.node("seg3").kind is Kind.bridge
    with pytest.raises(TopologyError, match="--node-filter names nosuch"):
        plan_from_file(LABS / "numbered-clos" / "numbered-clos.clab.yml",
                node_filter=["nosuch"])


def test_export_loads_back_as_frr_nodes_with_their_addresses(tmp_path: Path) -> None:
    plan = plan_from_file(TOPOLOGIES / "clos.yml")
    images = {"switch": "fabric-lab/switch:t", "host": "fabric-lab/host:t"}
    for relative, text in export_clab(plan, images).items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    again = plan_from_file(tmp_path / "clos.clab.yml")
    assert [n.name for n in again.nodes] == [n.name for n in plan.nodes]
    spine = again.node("spine1")
    assert spine.kind is Kind.frr and spine.exec == [] and spine.daemons == [
        "zebra", "staticd", "bgpd"]
    config = Path(spine.frr_config or "").read_text()
    assert f"ip address {plan.node('spine1').loopback4}/32" in config
    assert f"router bgp {plan.node('spine1').asn}" in config


def test_export_names_what_it_leaves_behind_at_the_top_of_the_file() -> None:
    """Nothing the lab runs beyond FRR is dropped silently: each is a line of the comment the
    exported file starts with (and of the console's output)."""
    images = {"switch": "fabric-lab/switch:t", "host": "fabric-lab/host:t"}
    fpf = plan_from_file(TOPOLOGIES / "fpf-mini.yml")
    lines = left_behind(fpf)
    assert [line.split(" ", 1)[0] for line in lines] == ["SAI", "BFD", "hosts"]
    assert lines[0].endswith(": p0-spine1, p0-leaf1, p0-leaf2, p1-spine1, p1-leaf1, p1-leaf2 "
                             "and 18 more")
    text = export_clab(fpf, images)["fpf-mini.clab.yml"]
    comment = [line for line in text.splitlines() if line.startswith("#")]
    assert comment[1:] == [f"# - {line}" for line in lines]
    assert load_text(text).spec.name == "fpf-mini"  # still a topology file
    bag = plan_from_file(TOPOLOGIES / "bag-mini.yml")
    delayed = [link for link in bag.links if link.impairment.delay_us]
    assert delayed and all(f"link {link.a} -- {link.b}: delay " in "\n".join(left_behind(bag))
                           for link in delayed)
    assert not any(line.startswith("link ") for line in left_behind(bag, netem=True))
    pair = plan_from_file(TOPOLOGIES / "pair.yml")  # FRR routers, clean links: all of it goes
    assert left_behind(pair) == [] and not export_clab(pair, images)["pair.clab.yml"].startswith(
        "#")


def test_impairments_travel_through_containerlabs_netem_on_both_ends_of_each_link() -> None:
    """As fabric-lab sets them: the egress of both ends, delay and jitter to the nanosecond;
    what netem cannot set (duplication here) stays named as left behind."""
    images = {"switch": "fabric-lab/switch:t", "host": "fabric-lab/host:t"}
    bag = plan_from_file(TOPOLOGIES / "bag-mini.yml")
    files = export_clab(bag, images)
    commands = [line for line in files[IMPAIRMENTS_SCRIPT].splitlines()
                if line.startswith("containerlab")]
    delayed = [link for link in bag.links if link.impairment.delay_us]
    assert len(commands) == 2 * len(delayed)
    first = delayed[0]
    assert commands[:2] == [
        f"containerlab tools netem set -n clab-bag-mini-{end.node} -i {end.iface} "
        f"--delay {round(first.impairment.delay_us * 1000)}ns" for end in (first.a, first.b)]
    assert IMPAIRMENTS_SCRIPT not in export_clab(plan_from_file(TOPOLOGIES / "clos.yml"), images)
    lossy = augment(load_text(
        "name: l\ntopology:\n  nodes: {a: {role: leaf}, b: {role: spine}}\n  links:\n"
        "    - {endpoints: [a:eth1, b:eth1], delay: 2ms, jitter: 100us, loss: 0.5%, "
        "rate: 10Mbit, duplicate: 1%}\n"))
    assert impairments_script(lossy).splitlines()[-1] == (
        "containerlab tools netem set -n clab-l-b -i eth1 --delay 2000000ns --jitter 100000ns "
        "--loss 0.5 --rate 10000")
    assert left_behind(lossy, netem=True) == ["link a:eth1 -- b:eth1: duplicate 1% not applied"]


def test_exported_images_are_loaded_and_pushed_under_the_names_the_file_gives() -> None:
    """With a registry the files name the images there, and the script pushes them there;
    without one it only loads them."""
    images = {"switch": "fabric-lab/switch:abc", "host": "fabric-lab/host:abc"}
    clos = plan_from_file(TOPOLOGIES / "clos.yml")
    assert used_images(clos, images) == ["fabric-lab/host:abc", "fabric-lab/switch:abc"]
    pair = plan_from_file(TOPOLOGIES / "pair.yml")
    assert used_images(pair, images) == ["fabric-lab/switch:abc"]
    assert load_script(["fabric-lab/switch:abc"], None).splitlines()[-1] == \
        f"docker load -i {IMAGES_TARBALL}"
    pushed = in_registry("fabric-lab/switch:abc", "registry.lab:5000/team/")
    assert pushed == "registry.lab:5000/team/fabric-lab/switch:abc"
    script = load_script(["fabric-lab/switch:abc"], "registry.lab:5000/team/")
    assert script.splitlines()[-2:] == [f"docker tag fabric-lab/switch:abc {pushed}",
                                        f"docker push {pushed}"]
    text = export_clab(pair, {k: in_registry(v, "registry.lab:5000/team") for k, v in
                              images.items()})["pair.clab.yml"]
    assert f"image: {pushed}" in text


def test_ignored_keys_are_reported_once() -> None:
    plan = augment(load_text("""
name: ig
prefix: ""
mgmt: {network: m}
topology:
  defaults: {kind: linux, ports: ["80:80"]}
  nodes:
    a: {mgmt-ipv4: 172.20.20.2, ports: ["81:81"]}
    b: {mgmt-ipv4: 172.20.20.3}
  links:
    - type: veth
      endpoints: [{node: a, interface: eth1, mac: "02:00:00:00:00:01"}, {node: b, interface: eth1}]
"""))
    assert [(str(link.a), str(link.b)) for link in plan.links] == [("a:eth1", "b:eth1")]
    assert "endpoint mac ignored (the kernel picks each veth's MAC): links[0]" in plan.notes
    assert "mgmt-ipv4 ignored (no management network: nodes are reached with `labctl "\
           "exec`): set on a, b" in plan.notes
    assert any(n.startswith("ports ignored") and n.endswith("defaults, a") for n in plan.notes)
    assert any(n.startswith("mgmt ignored") for n in plan.notes)
    assert any(n.startswith("prefix ignored") for n in plan.notes)
