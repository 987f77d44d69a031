from __future__ import annotations

from harness.topology.augment import augment
from harness.topology.loader import load_file, load_text
from harness.topology.render import render_frr
from tests.conftest import TOPOLOGIES


def test_frr_config_has_every_planned_session() -> None:
    plan = augment(load_file(TOPOLOGIES / "clos.yml"))
    for node in plan.nodes:
        text = render_frr(plan, node, "/tmp/frr.log")
        assert f"router bgp {node.asn}" in text
        assert f"network {node.loopback4}/32" in text
        assert f"network {node.loopback6}/128" in text
        for s in plan.sessions_of(node.name):
            assert f"neighbor {s.peer_ip} remote-as {s.peer_asn}" in text
            assert f"neighbor {s.peer_ip} activate" in text


def test_hosts_export_only_their_own_prefixes() -> None:
    plan = augment(load_file(TOPOLOGIES / "clos.yml"))
    host = render_frr(plan, plan.node("host1"), "/tmp/frr.log")
    leaf = render_frr(plan, plan.node("leaf1"), "/tmp/frr.log")
    assert "route-map EXPORT-LOCAL out" in host and "EXPORT-LOCAL" not in leaf


def test_bfd_profile_only_when_asked() -> None:
    base = "name: t\n{bgp}topology:\n  nodes: {{a: {{role: leaf}}, b: {{role: spine}}}}\n" \
           "  links: [{{endpoints: ['a:eth1', 'b:eth1']}}]\n"
    without = augment(load_text(base.format(bgp="")))
    with_bfd = augment(load_text(base.format(bgp="bgp: {bfd: {interval: 50ms}}\n")))
    assert "bfd profile" not in render_frr(without, without.node("a"), "/x")
    text = render_frr(with_bfd, with_bfd.node("a"), "/x")
    assert "neighbor 10.1.0.1 bfd profile fabric" in text
    assert "transmit-interval 50" in text and "detect-multiplier 3" in text
