"""Every shipped topology builds (namespaces, links, addresses, impairments) and leaves the host
exactly as it was. The FRR suites (clos, sai, fpf, impair) check the same with routing on;
this covers the files no other suite deploys, fpf-64 among them."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.deploy.lab import Lab
from harness.testing.hoststate import differences, snapshot
from harness.topology.pipeline import plan_from_file
from tests.conftest import TOPOLOGIES
from tests.e2e.conftest import leftovers

pytestmark = pytest.mark.e2e
SHIPPED = sorted(TOPOLOGIES.glob("*.yml"))


def test_there_are_shipped_topologies() -> None:
    assert {p.stem for p in SHIPPED} >= {"clos", "pair", "sai-fabric", "fpf-mini", "fpf-64"}


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_topology_builds_and_leaves_the_host_as_it_was(path: Path) -> None:
    name = f"ship-{path.stem}"[:24]
    plan = plan_from_file(path, name)
    before = snapshot()
    lab = Lab(plan)
    try:
        lab.deploy(start_frr=False)
        assert sorted(lab.runtime.existing_nodes()) == sorted(n.name for n in plan.nodes)
        for link in plan.links[:: max(1, len(plan.links) // 8)]:
            with lab.node(link.a.node).netlink() as ip:
                (iface,) = ip.link_lookup(ifname=link.a.iface)
                state = ip.get_links(iface)[0].get_attr("IFLA_OPERSTATE")
            assert state == "UP", f"{link.name}: {state}"
    finally:
        lab.destroy()
    assert leftovers(name) == []
    assert differences(before, snapshot()) == []
