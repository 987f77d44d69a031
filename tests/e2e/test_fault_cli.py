"""labctl fault on the default Clos: each fault injected by one process is seen by another
(`list`), changes what packets do, and is undone by a third; nothing of it stays behind."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.deploy.lab import Lab
from harness.testing.chaos import labctl

pytestmark = pytest.mark.e2e

NAME = "e2eclos"


def fault(*args: str) -> str:
    out = labctl("fault", NAME, *args)
    assert out.returncode == 0, out
    return out.stdout


def in_place() -> list[dict]:
    return json.loads(fault("list", "--json"))


def link_up(lab: Lab, node: str, iface: str) -> bool:
    shown = json.loads(lab.node(node).cmd("ip", "-j", "link", "show", iface).stdout)[0]
    return "LOWER_UP" in shown["flags"] and "UP" in shown["flags"]


def fault_tables(lab: Lab) -> list[str]:
    return [f"{n.name}: {line}" for n in lab.plan.nodes
            for line in lab.node(n.name).cmd("nft", "list", "tables").stdout.splitlines()
            if "fl_fault_" in line]


def ping_replies(lab: Lab, src: str, dst: str, count: int = 3, interval: str = "0.2") -> int:
    out = lab.node(src).cmd("ping", "-c", str(count), "-i", interval, "-W", "1", "-q",
                            lab.plan.node(dst).loopback4, timeout=60)
    counted = re.search(r"(\d+) received", out.stdout)
    assert counted, out
    return int(counted.group(1))


@pytest.fixture(autouse=True)
def nothing_left(clos_lab: Lab):
    yield
    assert labctl("fault", NAME, "clear").returncode == 0
    assert in_place() == [] and fault_tables(clos_lab) == []


def test_a_link_cut_in_one_shell_is_listed_and_undone_in_others(clos_lab: Lab) -> None:
    said = fault("link-down", "leaf1--spine1")
    assert "undo: labctl fault e2eclos link-up leaf1--spine1" in said
    assert not link_up(clos_lab, "leaf1", "eth1") and not link_up(clos_lab, "spine1", "eth1")
    listed = in_place()
    assert [(f["kind"], f["target"]) for f in listed] == [("link_down", "leaf1:eth1--spine1:eth1")]
    assert listed[0]["undo"]["ends_down"] == [{"node": "leaf1", "iface": "eth1"},
                                              {"node": "spine1", "iface": "eth1"}]
    assert "leaf1:eth1--spine1:eth1" in fault("list")
    assert ping_replies(clos_lab, "host1", "host2") == 3, "spine2 still carries it"
    fault("link-up", "leaf1:eth1")
    assert link_up(clos_lab, "leaf1", "eth1") and link_up(clos_lab, "spine1", "eth1")
    assert in_place() == []


def test_a_partition_stops_packets_until_cleared(clos_lab: Lab) -> None:
    said = fault("partition", "host1", "host[23]")
    assert re.search(r"fault (\d+) partition\(host1\|host2\+host3\)", said)
    assert ping_replies(clos_lab, "host1", "host2") == 0
    assert ping_replies(clos_lab, "host1", "host4") == 3, "only the sides named are cut"
    assert ping_replies(clos_lab, "host3", "host1") == 0
    fault("clear", str(in_place()[0]["id"]))
    assert ping_replies(clos_lab, "host1", "host2") == 3


def test_gray_loss_drops_its_share_with_the_link_up(clos_lab: Lab) -> None:
    """50% on each end of host1's link: a ping and its reply each pass with 1/2, so 1/4 of
    400 come back; 4 binomial standard deviations (8.7 each) either side."""
    fault("gray-loss", "host1--leaf1", "--loss", "50%")
    assert link_up(clos_lab, "host1", "eth1")
    replies = ping_replies(clos_lab, "host1", "host2", count=400, interval="0.005")
    assert 100 - 35 <= replies <= 100 + 35, replies
    fault("clear")
    assert ping_replies(clos_lab, "host1", "host2", count=20, interval="0.01") == 20


def test_a_crashed_switch_blackholes_until_restarted(clos_lab: Lab) -> None:
    fault("node-crash", "leaf2")
    assert in_place()[0]["undo"] == {"filters": ["leaf2"], "ends_down": [], "impaired": [],
                                     "restart": "leaf2", "sessions": {}, "own": {}}
    assert ping_replies(clos_lab, "host1", "host2") == 0
    assert "converged again" in fault("node-restart", "leaf2")
    assert ping_replies(clos_lab, "host1", "host2") == 3


def test_a_crashed_switch_comes_back_with_its_impaired_links(clos_lab: Lab) -> None:
    """The userspace impairment engines of a switch's links run in the switch and die with
    it; restarting the switch starts them again, or its delayed link carries nothing one way
    and its session there never returns (the nightly found it on bag-mini's long hauls)."""
    assert labctl("netem", "set", f"{NAME}/leaf2:eth1", "--delay", "2ms").returncode == 0
    try:
        fault("node-crash", "leaf2")
        assert "converged again" in fault("node-restart", "leaf2")
        [shown] = json.loads(labctl("netem", "show", NAME, "--json").stdout)
        assert (shown["endpoint"], shown["health"]) == ("leaf2:eth1", "active"), shown
        assert ping_replies(clos_lab, "host1", "host2") == 3
    finally:
        assert labctl("netem", "clear", f"{NAME}/leaf2:eth1").returncode == 0


def test_a_bgp_reset_returns_once_the_sessions_are_back(clos_lab: Lab) -> None:
    said = fault("bgp-reset", "leaf3", "--peer", "spine1")
    assert "bgp_reset(leaf3->spine1): sessions Established again" in said
    assert clos_lab.frr("leaf3").bgp_peer_states() == {
        s.peer_ip: "Established" for s in clos_lab.plan.sessions_of("leaf3")}


@pytest.mark.parametrize(("args", "message"), [
    (["link-down", "leaf1--host4"], "has no link 'leaf1--host4'; name one end as 'node:iface'"),
    (["plane-down", "1"], "lab e2eclos has no plane 1; planes: none"),
    (["partition", "host1", "nosuch*"], "no node of lab e2eclos matches 'nosuch*'"),
    (["gray-loss", "--loss", "2%"], "gray-loss takes a LINK or --plane N"),
    (["gray-loss", "host1:eth1", "--loss", "0%"], "above 0% and at most 100%"),
    (["link-up", "leaf1--spine1"], "no active link_down(leaf1:eth1--spine1:eth1) to undo"),
    (["clear", "99"], "e2eclos has no fault 99 in place"),
])
def test_bad_requests_name_the_fix_and_inject_nothing(clos_lab: Lab, args: list[str],
                                                       message: str) -> None:
    out = labctl("fault", NAME, *args)
    assert out.returncode == 2 and message in " ".join(out.stderr.split()), out
    assert in_place() == []


def test_inspect_names_faults_in_place_and_details_each_node(clos_lab: Lab) -> None:
    fault("link-down", "leaf4--spine2")
    shown = labctl("inspect", NAME)
    assert "1 fault(s) in place: link_down(leaf4:eth2--spine2:eth4)" in " ".join(
        shown.stdout.split()), shown
    out = labctl("inspect", NAME, "--details")
    assert out.returncode == 0, out
    found = json.loads(out.stdout)
    assert [f["kind"] for f in found["faults"]] == ["link_down"]
    leaf4 = next(n for n in found["nodes"] if n["node"] == "leaf4")
    assert leaf4["plan"]["interfaces"][1]["peer"] == {"node": "spine2", "iface": "eth4"}
    assert Path(leaf4["netns"]).exists() and Path(leaf4["dir"]).is_dir()
