"""Bad impairments and endpoints are refused before anything is touched (no root needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import build_parser
from harness.cli.netem import parse_target
from harness.core.errors import LabError
from harness.deploy.lab import Lab
from harness.links import impair
from harness.links.impair import backend
from harness.links.impair.backend import CHOICE_ENV, select_backend
from harness.linux.features import Feature
from harness.topology.augment import augment
from harness.topology.loader import load_text
from harness.topology.plan import Endpoint, Impairment, Lossless
from tests.conftest import TOPOLOGIES


def pair_with(link_keys: str) -> str:
    """topologies/pair.yml with extra keys on its one link (the file ends with that link)."""
    return (TOPOLOGIES / "pair.yml").read_text() + link_keys


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Lab:
    monkeypatch.setenv("FABRIC_LAB_ROOT", str(tmp_path))
    return Lab(augment(load_text(pair_with("      distance_km: 40\n      loss: 0.1%\n")),
                       "impunit"))


def test_topology_impairment_comes_from_the_fibre(lab: Lab) -> None:
    imp = lab.plan.links[0].impairment
    assert imp.delay_us == pytest.approx(40 * 4.897, abs=0.05) and imp.loss_pct == 0.1


@pytest.mark.parametrize("bad", [
    Impairment(delay_us=-1), Impairment(jitter_us=-5), Impairment(loss_pct=101),
    Impairment(duplicate_pct=-0.1), Impairment(rate_bps=10), Impairment(delay_us=11e6),
    Impairment(lossless=Lossless(xoff=1000, headroom=0, drain_bps=10**6)),
    Impairment(rate_bps=10**8, lossless=Lossless(xoff=0, headroom=0, drain_bps=10**6)),
    Impairment(rate_bps=10**8, lossless=Lossless(xoff=1, headroom=0, drain_bps=10**6, dscp=64))])
def test_impossible_values_are_refused_untouched(lab: Lab, bad: Impairment) -> None:
    with pytest.raises(LabError, match="nothing was changed"):
        impair.apply(lab, Endpoint(node="r1", iface="eth1"), bad)
    assert not lab.dir.exists()


def test_unknown_endpoint_names_the_choices(lab: Lab) -> None:
    with pytest.raises(LabError, match="it has: eth1"):
        impair.apply(lab, Endpoint(node="r1", iface="eth7"), Impairment(delay_us=10))
    with pytest.raises(LabError, match="no node 'r9'"):
        impair.apply(lab, Endpoint(node="r9", iface="eth1"), Impairment(delay_us=10))
    assert not lab.dir.exists()


@pytest.mark.parametrize("argv", [
    ["--delay", "5"], ["--delay", "5 parsecs"], ["--loss", "0.1"], ["--loss", "120%"],
    ["--rate", "10Gbps"], ["--jitter", "-3us"], ["--duplicate", "x%"]])
def test_cli_units_are_strict(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["netem", "set", "lab/r1:eth1", *argv])
    assert exc.value.code == 2
    assert "argument --" in capsys.readouterr().err


def test_cli_units_parse() -> None:
    args = build_parser().parse_args(["netem", "set", "lab/r1:eth1", "--delay", "200us",
                                      "--jitter", "20us", "--loss", "0.1%", "--duplicate",
                                      "0.1%", "--rate", "10Gbit"])
    assert (args.delay, args.jitter, args.loss, args.duplicate, args.rate) == (
        200.0, 20.0, 0.1, 0.1, 10_000_000_000)


@pytest.mark.parametrize("target", ["r1", "lab/r1", "lab/:eth1", "r1:"])
def test_targets_must_be_node_colon_iface(target: str) -> None:
    with pytest.raises(LabError, match=r"\[LAB/\]NODE:IFACE"):
        parse_target(target)


def test_a_lossless_class_always_takes_the_userspace_engine(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Linux has no PFC: even where netem exists, or is asked for, the class needs the engine."""
    monkeypatch.setattr(backend, "feature", lambda name: Feature(name, True, "a stand-in"))
    pfc = Impairment(rate_bps=10**8, lossless=Lossless(xoff=1, headroom=0, drain_bps=10**6))
    assert select_backend(Impairment(delay_us=10)).name == "netem"
    for choice in ("auto", "userspace"):
        monkeypatch.setenv(CHOICE_ENV, choice)
        assert select_backend(pfc).name == "userspace"
    monkeypatch.setenv(CHOICE_ENV, "netem")
    with pytest.raises(LabError, match="netem has no lossless class"):
        select_backend(pfc)
