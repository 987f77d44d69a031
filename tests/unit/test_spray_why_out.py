"""Why `inspect` says a plane is out: BFD for every destination, else per destination a route
gone or the probes' drain, each cause named when destinations differ."""

from __future__ import annotations

from harness.spray.nic import SprayView, why_out

HOSTS = ["10.0.0.2", "10.0.0.3", "10.0.0.4"]


def view(*, bfd_down: set[int] = frozenset(), drained: dict[str, dict[int, str]] | None = None,
         routes: dict[str, list[int]] | None = None) -> SprayView:
    return SprayView(alive=True, nics={}, spray={}, last_reaction_ms=None, switched_ns={},
                     bfd_down=frozenset(bfd_down), drained=drained or {},
                     routes=routes if routes is not None else {a: [0, 6] for a in HOSTS},
                     changes=1)


def test_bfd_down_names_bfd_whatever_else_holds() -> None:
    assert why_out(view(bfd_down={6}, drained={a: {6: "loss"} for a in HOSTS}), 6, HOSTS) == \
        "BFD down"


def test_a_gray_plane_drained_towards_every_host() -> None:
    assert why_out(view(drained={a: {6: "loss"} for a in HOSTS}), 6, HOSTS) == "data-plane loss"


def test_a_plane_whose_routes_are_gone() -> None:
    assert why_out(view(routes={a: [0] for a in HOSTS}), 6, HOSTS) == "route gone"


def test_a_gray_plane_that_also_lost_a_route_names_both() -> None:
    routes = {a: [0, 6] for a in HOSTS} | {HOSTS[2]: [0]}
    assert why_out(view(drained={a: {6: "loss"} for a in HOSTS}, routes=routes), 6, HOSTS) == \
        "route gone (1 host), data-plane loss (2 hosts)"
