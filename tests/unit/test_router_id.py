"""A config's router IDs, which a start applies before the rest (router_id.py)."""

from __future__ import annotations

from pathlib import Path

from harness.nodes.router_id import router_ids

LABS = Path(__file__).parent.parent / "labs"


def test_the_triangle_routers_ospf_id_comes_out_under_its_router_ospf() -> None:
    config = (LABS / "ospf-triangle" / "r3" / "frr.conf").read_text()
    assert router_ids(config) == "router ospf\n ospf router-id 3.3.3.3\nexit\n"


def test_zebras_ids_and_every_ospf_instances_are_kept_in_order() -> None:
    config = """frr version 8.4
router-id 9.9.9.9
ip router-id 9.9.9.8 vrf red
interface eth1
 ip ospf area 0
exit
router ospf vrf red
 ospf router-id 1.1.1.1
 redistribute connected
exit
!
router ospf6
 ospf6 router-id 2.2.2.2
"""
    assert router_ids(config) == ("router-id 9.9.9.9\nip router-id 9.9.9.8 vrf red\n"
                                  "router ospf vrf red\n ospf router-id 1.1.1.1\nexit\n"
                                  "router ospf6\n ospf6 router-id 2.2.2.2\nexit\n")


def test_a_line_is_read_in_the_section_frr_reads_it_in() -> None:
    # unindented and after a comment, still OSPF's (its hidden bare form); after `exit`, zebra's
    assert router_ids("router ospf\n!\nrouter-id 1.1.1.1\nexit\nrouter-id 2.2.2.2\n") == \
        "router ospf\n router-id 1.1.1.1\nexit\nrouter-id 2.2.2.2\n"
    # another section's lines are not router IDs, nor is BGP's (a BGP session resets on it)
    assert router_ids("router bgp 65001\n bgp router-id 1.1.1.1\nvrf red\n ip router-id 3.3.3.3\n"
                      "exit-vrf\n") == ""
    # an indented exit leaves `router ospf` as well
    assert router_ids("router ospf\n exit\n router-id 1.1.1.1\n") == ""
