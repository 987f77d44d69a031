"""The FPM decoder on bytes a real zebra sent (tests/corpus/fpm, recorded by
tests/tools/capture_fpm.py), checked against what was configured there, not against frames
this project encoded itself. A damaged header must be refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.nodes.switch.agent.decode import (
    Event,
    NexthopDelete,
    NexthopUpdate,
    RouteDelete,
    RouteUpdate,
    decode,
)
from harness.nodes.switch.agent.fpm import FpmError, FpmReader

CAPTURES = sorted((Path(__file__).parent.parent / "corpus" / "fpm").glob("zebra-*.fpm"))


def events_of(stream: bytes) -> list[Event]:
    reader = FpmReader()
    return [e for payload in reader.feed(stream) for e in decode(payload)]


def gateways_of(route: RouteUpdate, nexthops: dict[int, NexthopUpdate]) -> set[str]:
    """The gateways a route resolves to, through zebra's next-hop objects or inline hops."""
    if route.hops:
        return {h.gateway for h in route.hops if h.gateway}
    top = nexthops[route.nh_id]
    members = [nexthops[i] for i, _weight in top.group] if top.group else [top]
    return {m.hop.gateway for m in members if m.hop and m.hop.gateway}


@pytest.fixture(params=CAPTURES, ids=[p.stem for p in CAPTURES])
def capture(request: pytest.FixtureRequest) -> tuple[list[Event], dict]:
    path: Path = request.param
    return events_of(path.read_bytes()), json.loads(path.with_suffix(".json").read_text())


def test_there_is_a_capture() -> None:
    assert CAPTURES, "run tests/tools/capture_fpm.py as root to record one"


def test_the_fib_zebra_replayed_and_the_statics_added(capture) -> None:
    events, want = capture
    nexthops: dict[int, NexthopUpdate] = {}
    routes: dict[str, RouteUpdate] = {}
    deleted: set[str] = set()
    for event in events:
        if isinstance(event, NexthopUpdate):
            nexthops[event.id] = event
        elif isinstance(event, NexthopDelete):
            nexthops.pop(event.id, None)
        elif isinstance(event, RouteUpdate):
            routes[str(event.prefix)] = event
            deleted.discard(str(event.prefix))
        elif isinstance(event, RouteDelete):
            routes.pop(str(event.prefix), None)
            deleted.add(str(event.prefix))
    for node, loopback in want["loopbacks"].items():
        assert f"{loopback}/32" in routes, node
    ecmp_prefix, ecmp_gateways = want["statics"]["ecmp"]
    assert gateways_of(routes[ecmp_prefix], nexthops) == set(ecmp_gateways)
    v6_prefix, v6_gateways = want["statics"]["v6"]
    assert gateways_of(routes[v6_prefix], nexthops) == set(v6_gateways)
    blackhole = routes[want["statics"]["blackhole"][0]]
    assert blackhole.blackhole or nexthops[blackhole.nh_id].blackhole
    assert want["statics"]["removed"] in deleted


def test_a_damaged_header_is_refused(capture) -> None:
    stream = CAPTURES[0].read_bytes()
    with pytest.raises(FpmError):
        events_of(b"\x02" + stream[1:])  # FPM version 2 does not exist
    with pytest.raises(FpmError):
        events_of(stream[:2] + b"\x00\x01" + stream[4:])  # a length shorter than the header
