"""Scale-up pods and switch platforms, undeployed: the generator picks a platform with a port
for every accelerator, the shipped pods are what it writes, the pod is non-blocking by
construction and an uneven one is caught; a bad `platform:` is refused at its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.errors import TopologyError
from harness.fabrics.scaleup import (
    ScaleupParameterError,
    ScaleupParams,
    generate,
    nonblocking,
    plan,
)
from harness.topology.augment import augment
from harness.topology.loader import load_text
from harness.topology.platforms import PLATFORMS
from harness.topology.schema import Role
from tests.conftest import regenerated


@pytest.mark.parametrize(("accelerators", "switches", "platform"),
                         [(16, 4, "tahan"), (32, 4, "tahan"), (72, 8, "scaleup-blade")])
def test_the_pod_gets_the_first_platform_with_room(accelerators: int, switches: int,
                                                   platform: str) -> None:
    pod = plan(ScaleupParams(accelerators=accelerators, switches=switches))
    switch_nodes = [n for n in pod.nodes if n.role is Role.scaleup]
    assert {n.platform for n in switch_nodes} == {platform}
    assert sorted(n.plane for n in switch_nodes) == list(range(switches))
    assert all(len(n.interfaces) == switches for n in pod.nodes if n.role is Role.host)
    assert nonblocking(pod) == []


def test_a_pod_too_big_for_its_platform_is_refused_with_the_fix() -> None:
    with pytest.raises(ScaleupParameterError, match="tahan switch has 32 ports toward "
                       "accelerators; use at most that, or --platform auto"):
        generate(ScaleupParams(accelerators=40, switches=4, platform="tahan"))
    with pytest.raises(ScaleupParameterError, match="at most that"):
        generate(ScaleupParams(accelerators=300, switches=4))


@pytest.mark.parametrize("name", ["scaleup-16.yml", "scaleup-72.yml"])
def test_shipped_pods_are_what_the_generator_writes(name: str, tmp_path: Path) -> None:
    shipped, now = regenerated(name, tmp_path)
    assert shipped == now


def test_an_uneven_pod_is_not_non_blocking() -> None:
    data = generate(ScaleupParams(accelerators=4, switches=2))
    data["topology"]["links"] = data["topology"]["links"][:-1]  # acc4 loses its port on sw2
    found = nonblocking(augment(load_text(_yaml(data), "uneven.yml")))
    assert found == ["sw2: uneven ports toward accelerators: {'acc4': 0}"]


def _yaml(data: dict) -> str:
    from harness.topology.loader import dump_yaml
    return dump_yaml(data)


@pytest.mark.parametrize(("node", "says", "fix"), [
    ("{role: leaf, kind: sai, platform: tahn}", "unknown platform 'tahn'", "did you mean 'tahan'"),
    ("{role: leaf, kind: frr, platform: tahan}", "a platform is a SAI switch's hardware",
     "add 'kind: sai'"),
    ("{role: leaf, kind: sai, platform: small}", None, None),
])
def test_a_platform_is_checked_at_its_line(node: str, says: str | None, fix: str | None) -> None:
    text = f"name: p\ntopology:\n  nodes:\n    leaf1: {node}\n    leaf2: {{role: leaf}}\n" \
           "  links:\n    - endpoints: [leaf1:eth1, leaf2:eth1]\n"
    if says is None:
        assert augment(load_text(text, "p.yml")).node("leaf1").platform == "small"
        return
    with pytest.raises(TopologyError) as err:
        augment(load_text(text, "p.yml"))
    assert f"p.yml:4: topology.nodes.leaf1.platform: {says}" in str(err.value)
    assert fix in str(err.value)


def test_a_platform_with_too_few_ports_is_refused() -> None:
    links = "".join(f"    - endpoints: [acc{a}:eth1, sw1:eth{a}]\n" for a in range(1, 67))
    nodes = "".join(f"    acc{a}: {{role: host}}\n" for a in range(1, 67))
    text = ("name: p\ntopology:\n  nodes:\n    sw1: {role: scaleup, kind: sai, platform: tahan}\n"
            f"{nodes}  links:\n{links}")
    with pytest.raises(TopologyError, match="sw1 has 66 links but a tahan has 64 ports"):
        augment(load_text(text, "p.yml"))
    assert PLATFORMS["tahan"].hardware() == "64 x 800G, 51.2T, Tomahawk 5"
