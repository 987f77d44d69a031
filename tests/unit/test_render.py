from __future__ import annotations

from harness.topology.augment import augment
from harness.topology.loader import load_text
from harness.topology.pipeline import plan_from_file
from harness.topology.render import (
    FRR_HOLD_MS,
    after_boot,
    bfd_attachment,
    boot_hold_ms,
    render_frr,
)
from tests.conftest import TOPOLOGIES


def test_frr_config_has_every_planned_session() -> None:
    plan = plan_from_file(TOPOLOGIES / "clos.yml")
    for node in plan.nodes:
        text = render_frr(plan, node, "/tmp/frr.log")
        assert f"router bgp {node.asn}" in text
        assert f"network {node.loopback4}/32" in text
        assert f"network {node.loopback6}/128" in text
        for s in plan.sessions_of(node.name):
            assert f"neighbor {s.peer_ip} remote-as {s.peer_asn}" in text
            assert f"neighbor {s.peer_ip} activate" in text
        assert f" timers bgp {plan.keepalive} {plan.hold}\n" in text


def test_a_big_lab_under_bfd_renders_its_stretched_bgp_timers() -> None:
    plan = plan_from_file(TOPOLOGIES / "fpf-64.yml")  # 1,152 session ends: 6 s / 18 s
    assert " timers bgp 6 18\n" in render_frr(plan, plan.nodes[0], "/tmp/frr.log")


def test_hosts_export_only_their_own_prefixes() -> None:
    plan = plan_from_file(TOPOLOGIES / "clos.yml")
    host = render_frr(plan, plan.node("host1"), "/tmp/frr.log")
    leaf = render_frr(plan, plan.node("leaf1"), "/tmp/frr.log")
    assert "route-map EXPORT-LOCAL out" in host and "EXPORT-LOCAL" not in leaf


PAIR = "name: t\n{bgp}topology:\n  nodes: {{a: {{role: leaf}}, b: {{role: spine}}}}\n" \
       "  links: [{{endpoints: ['a:eth1', 'b:eth1']}}]\n"


def test_bfd_profile_only_when_asked() -> None:
    without = augment(load_text(PAIR.format(bgp="")))
    with_bfd = augment(load_text(PAIR.format(bgp="bgp: {bfd: {interval: 50ms}}\n")))
    assert "bfd profile" not in render_frr(without, without.node("a"), "/x")
    text = render_frr(with_bfd, with_bfd.node("a"), "/x")
    assert "neighbor 10.1.0.1 bfd profile fabric" in text
    assert "transmit-interval 50" in text and "detect-multiplier 3" in text


def test_a_node_boots_without_bfd_on_its_sessions_and_gets_it_once_bgp_is_up() -> None:
    """FRR 8.4 resets every BGP session once when BFD was registered before BGP came up
    (FRRouting/frr#17337): the profiles boot with the node, the sessions join them later."""
    plan = augment(load_text(PAIR.format(bgp="bgp: {bfd: {interval: 100ms}}\n")))
    leaf = plan.node("a")
    boot = render_frr(plan, leaf, "/x", boot=True)
    assert "profile fabric" in boot and " bfd profile" not in boot
    full = render_frr(plan, leaf, "/x")
    lines = bfd_attachment(plan, leaf)
    assert sorted(lines) == sorted(line.strip() for line in full.splitlines()
                                   if " bfd profile " in line)
    assert len(lines) == len(plan.sessions_of("a")) == 1  # one carries both families
    assert after_boot(plan, leaf) == ["configure terminal", f"router bgp {leaf.asn}", *lines]
    assert bfd_attachment(augment(load_text(PAIR.format(bgp=""))), leaf) == []


def test_zebra_gathers_a_big_labs_routes_while_it_boots_and_frr_holds_them_after() -> None:
    """A boot config holds route changes for longer the more nodes the lab has; `after_boot`
    puts FRR's own hold back, so a converged lab handles a failure as FRR does."""
    small = augment(load_text(PAIR.format(bgp="")))
    assert boot_hold_ms(small) is None and after_boot(small, small.node("a")) == []
    assert "work-queue" not in render_frr(small, small.node("a"), "/x", boot=True)
    big = plan_from_file(TOPOLOGIES / "fpf-64.yml")
    hold = boot_hold_ms(big)
    assert hold is not None and FRR_HOLD_MS < hold <= 1000
    for node in big.nodes:
        assert f"\nzebra work-queue {hold}\n" in render_frr(big, node, "/x", boot=True)
        assert "work-queue" not in render_frr(big, node, "/x")
        assert after_boot(big, node)[:2] == ["configure terminal", "no zebra work-queue"]


def test_one_end_of_each_session_opens_it_the_upper_tier_waits() -> None:
    """Both ends opening at once made FRR 8.4 drop sessions at deploy: the upper tier (between
    equal roles, the later name) waits for the other to connect."""
    plan = plan_from_file(TOPOLOGIES / "clos.yml")
    tier = {"host": 0, "leaf": 1, "spine": 2}
    for node in plan.nodes:
        text = render_frr(plan, node, "/x")
        for s in plan.sessions_of(node.name):
            peer = plan.node(s.peer)
            upper = (tier[node.role.value], node.name) > (tier[peer.role.value], peer.name)
            assert (f"neighbor {s.peer_ip} passive\n" in text) == upper == s.passive, s
            back = next(t for t in plan.sessions_of(s.peer) if t.peer_ip == s.local_ip)
            assert back.passive != s.passive


def test_a_nodes_own_bfd_overrides_the_labs() -> None:
    """`bfd: {multiplier: 5, offload: false}` on a node: its profiles say 5, and its sessions
    stay in bfdd (no fl-bfd); the other node keeps the lab's 3 and its offload."""
    plan = augment(load_text("""
name: mixedbfd
bgp: {bfd: {interval: 100ms, multiplier: 3}}
topology:
  nodes: {r1: {role: leaf}, r2: {role: spine, bfd: {offload: false, multiplier: 5}}}
  links: [{endpoints: ["r1:eth1", "r2:eth1"]}]
"""))
    assert plan.bfd is not None
    r1, r2 = plan.node("r1"), plan.node("r2")
    assert "detect-multiplier 5" in render_frr(plan, r2, "/dev/null")
    assert "detect-multiplier 3" in render_frr(plan, r1, "/dev/null")
    assert r1.bfd_offloaded(plan.bfd) and not r2.bfd_offloaded(plan.bfd)


def test_bag_switches_advertise_the_paths_they_have_as_link_bandwidth() -> None:
    """Every session of a BAG switch sends its routes with FRR's num-multipaths link
    bandwidth; a building's spine sends none (it weights what the BAG switches send)."""
    plan = plan_from_file(TOPOLOGIES / "bag-mini.yml")
    bag = render_frr(plan, plan.node("r1-bag1"), "/dev/null")
    assert "set extcommunity bandwidth num-multipaths" in bag
    sessions = plan.sessions_of("r1-bag1")
    assert bag.count("route-map LINK-BANDWIDTH out") == 2 * len(sessions)  # IPv4 and IPv6
    assert "LINK-BANDWIDTH" not in render_frr(plan, plan.node("r1b1-spine1"), "/dev/null")
