"""ansible against a running Clos, from Python through ansible-runner: the inventory labctl
writes, the fabric_lab connection into every node (netns or container), and the playbooks in
ansible/: BGP state as facts, an FRR change pushed once, a spine drained and put back."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import ansible_runner
import pytest
import yaml

from harness.core.errors import LabError
from harness.core.wait import none_left, wait_until
from harness.deploy.lab import Lab
from harness.testing.chaos import labctl
from tests.conftest import REPO

pytestmark = pytest.mark.e2e

NAME = "e2eclos"
LINE = "ip prefix-list OPS seq 5 permit 10.0.0.0/8 le 32"


@pytest.fixture(scope="module")
def inventory(clos_lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ansible") / "inventory.yml"
    out = labctl("ansible-inventory", NAME, "-o", str(path))
    assert out.returncode == 0, out
    return path


def play(inventory: Path, tmp_path: Path, playbook: str, **extra: object
         ) -> ansible_runner.Runner:
    tmp_path.mkdir(parents=True, exist_ok=True)
    runner = ansible_runner.run(
        private_data_dir=str(tmp_path), project_dir=str(REPO / "ansible"), playbook=playbook,
        inventory=str(inventory), extravars=extra, fact_cache_type="jsonfile", quiet=True,
        envvars={"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    assert runner.status == "successful", runner.stdout.read()
    return runner


def test_the_inventory_groups_nodes_by_role_and_kind(inventory: Path) -> None:
    found = yaml.safe_load(inventory.read_text())["all"]
    assert found["vars"]["ansible_connection"] == "fabric_lab"
    assert set(found["children"]["role_spine"]["hosts"]) == {"spine1", "spine2"}
    assert set(found["children"]["switches"]["hosts"]) == {"spine1", "spine2", "leaf1",
                                                          "leaf2", "leaf3", "leaf4"}
    assert set(found["children"]["kind_sai"]["hosts"]) == set(found["children"]["switches"][
        "hosts"])
    assert found["hosts"]["leaf1"]["asn"] and len(found["hosts"]["leaf1"]["bgp_neighbors"]) == 3


def test_bgp_state_comes_back_as_facts(clos_lab: Lab, inventory: Path, tmp_path: Path) -> None:
    runner = play(inventory, tmp_path, "bgp-facts.yml")
    for node in ("leaf1", "spine2", "host3"):
        facts = runner.get_fact_cache(node)
        peers = facts["bgp_summary"]["ipv4Unicast"]["peers"]
        assert set(peers) == {s.peer_ip for s in clos_lab.plan.sessions_of(node)}
        assert facts["bgp_down"] == []


def test_an_frr_change_is_pushed_once_and_saved(clos_lab: Lab, inventory: Path,
                                                tmp_path: Path) -> None:
    first = play(inventory, tmp_path / "1", "frr-config.yml", target="leaf2", frr_lines=[LINE])
    assert first.stats["changed"] == {"leaf2": 2}, "added, then saved"
    assert LINE in clos_lab.frr("leaf2").vtysh("show running-config").splitlines()
    assert LINE in (clos_lab.node_dir("leaf2") / "frr.conf").read_text()
    again = play(inventory, tmp_path / "2", "frr-config.yml", target="leaf2", frr_lines=[LINE])
    assert again.stats["changed"] == {}, "nothing missing: nothing done"


def next_hops(lab: Lab, node: str, dst: str) -> set[str]:
    route = lab.frr(node).show_json("zebra", f"show ip route {dst}/32")[f"{dst}/32"][0]
    return {hop["interfaceName"] for hop in route["nexthops"] if hop.get("active")}


def test_a_drained_spine_carries_nothing_until_undrained(clos_lab: Lab, inventory: Path,
                                                         tmp_path: Path) -> None:
    host3 = clos_lab.plan.node("host3").loopback4
    assert next_hops(clos_lab, "leaf1", host3) == {"eth1", "eth2"}, "ECMP over both spines"
    play(inventory, tmp_path / "drain", "drain.yml", target="spine1")
    wait_until(lambda: [] if next_hops(clos_lab, "leaf1", host3) == {"eth2"} else ["eth1"],
               10, lambda _: LabError("leaf1 still sends to host3 through spine1"), until=none_left)
    out = clos_lab.node("host1").cmd("ping", "-c", "3", "-i", "0.2", "-W", "2", host3)
    assert out.returncode == 0, out
    play(inventory, tmp_path / "undrain", "undrain.yml", target="spine1")
    wait_until(lambda: [] if next_hops(clos_lab, "leaf1", host3) == {"eth1", "eth2"}
               else ["eth1"], 10, lambda _: LabError("spine1 not back in leaf1's ECMP"),
               until=none_left)
    assert "FL-DRAIN" not in clos_lab.frr("spine1").vtysh("show running-config")
