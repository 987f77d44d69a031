"""The FPF generator: planes are disjoint, hosts have one NIC per plane, bad input is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.fabrics.base import render
from harness.fabrics.fpf import FABRIC, FpfParameterError, FpfParams, check, plan
from harness.topology.reachability import reachable_origins
from harness.topology.render import render_frr
from harness.topology.schema import Role
from tests.conftest import regenerated

ROOT = Path(__file__).resolve().parents[2]
MINI = FpfParams(leaves_per_plane=2, spines_per_plane=1, hosts=4, name="fpf-mini",
                 host_echo="50ms")
SIXTY_FOUR = FpfParams(leaves_per_plane=4, spines_per_plane=2, hosts=64, name="fpf-64")


@pytest.mark.parametrize("params, file", [(MINI, "fpf-mini.yml"), (SIXTY_FOUR, "fpf-64.yml")])
def test_committed_topologies_are_what_their_generated_by_command_writes(params, file, tmp_path):
    """The command each file names, run through `labctl gen` (the generator registry and the
    options it makes from FpfParams), writes the file byte for byte."""
    shipped, generated = regenerated(file, tmp_path)
    assert generated == shipped == render(FABRIC, params)


def test_every_switch_has_a_role_and_plane_and_hosts_one_nic_per_plane():
    p = plan(MINI)
    switches = [n for n in p.nodes if n.role is not Role.host]
    assert len(switches) == 8 * 3 and all(n.plane is not None for n in switches)
    for host in (n for n in p.nodes if n.role is Role.host):
        assert host.plane is None and host.labels == {"nic-speed": "100G"}
        nics = {i.name: p.node(i.peer.node) for i in host.interfaces}
        assert sorted(nics) == [f"eth{k}" for k in range(1, 9)]
        for name, leaf in nics.items():
            assert leaf.role is Role.leaf and leaf.plane == int(name[3:]) - 1


def test_planes_share_no_links():
    p = plan(SIXTY_FOUR)
    for link in p.links:
        planes = {p.node(e.node).plane for e in (link.a, link.b)} - {None}
        assert len(planes) == 1, link.name


def test_hosts_on_different_leaves_reach_each_other_in_every_plane():
    p = plan(MINI)
    assert "host3" in reachable_origins(p)["host1"]
    assert len(p.sessions_of("host1")) == 8  # one eBGP session per plane, both families


def test_bfd_is_on_every_session_with_echo_on_host_links():
    p = plan(MINI)
    host = render_frr(p, p.node("host1"), "/dev/null")
    leaf = render_frr(p, p.node("p0-leaf1"), "/dev/null")
    assert host.count("bfd profile host-link") == 8 and "echo-mode" in host
    assert "detect-multiplier 3" in host and "transmit-interval 100" in host
    assert leaf.count("bfd profile host-link") == 2  # host1, host2
    assert leaf.count("bfd profile fabric") == 1  # the spine uplink


def test_bfd_echo_is_opt_in_and_its_interval_checked():
    p = plan(SIXTY_FOUR)
    assert p.bfd is not None and p.bfd.host_echo_ms is None
    assert "echo-mode" not in render_frr(p, p.node("host1"), "/dev/null")
    with pytest.raises(FpfParameterError, match=r"--host-echo 5: .* not a duration"):
        check(FpfParams(host_echo="5"))


def test_hosts_must_fit_the_leaf_ports():
    with pytest.raises(FpfParameterError) as err:
        check(FpfParams(leaves_per_plane=1, spines_per_plane=2, hosts=100, leaf_radix=64))
    text = str(err.value)
    assert "--hosts 100" in text and "--leaf-radix is 64" in text and "at most 62" in text


def test_every_bad_parameter_is_reported_at_once():
    with pytest.raises(FpfParameterError) as err:
        check(FpfParams(planes=0, leaves_per_plane=0, hosts=1))
    text = str(err.value)
    assert "--planes 0" in text and "--leaves-per-plane 0" in text and "--hosts 1" in text


def test_more_leaves_than_hosts_is_refused():
    with pytest.raises(FpfParameterError, match="more leaves than hosts"):
        check(FpfParams(leaves_per_plane=8, hosts=4))


def test_cli_writes_a_deployable_file(tmp_path, capsys):
    out = tmp_path / "fpf.yml"
    assert main(["gen", "fpf", "--planes", "2", "--leaves-per-plane", "1",
                 "--spines-per-plane", "1", "--hosts", "2", "-o", str(out)]) == 0
    assert "name: fpf-2h" in out.read_text()
    assert main(["gen", "fpf", "--leaves-per-plane", "1", "--spines-per-plane", "1",
                 "--hosts", "500"]) == 2
    assert "--leaf-radix" in capsys.readouterr().err


def test_switches_are_sai_switches_unless_asked_for_plain_routers(tmp_path):
    assert {n.kind.value for n in plan(MINI).nodes if n.role is not Role.host} == {"sai"}
    out = tmp_path / "fpf.yml"
    assert main(["gen", "fpf", "--planes", "2", "--leaves-per-plane", "1",
                 "--spines-per-plane", "1", "--hosts", "2", "--switch-kind", "frr",
                 "-o", str(out)]) == 0
    text = out.read_text()
    assert "--switch-kind frr" in text.splitlines()[1] and "kind: sai" not in text
    kinds = {n.role: n.kind.value for n in plan(FpfParams(planes=2, leaves_per_plane=1,
                                                           spines_per_plane=1, hosts=2,
                                                           switch_kind="frr")).nodes}
    assert kinds == {Role.spine: "frr", Role.leaf: "frr", Role.host: "host"}, \
        "hosts on two planes spray over them, whatever the switches are"
    with pytest.raises(FpfParameterError, match="--switch-kind p4: use sai or frr"):
        check(FpfParams(switch_kind="p4"))
