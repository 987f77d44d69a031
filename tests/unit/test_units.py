from __future__ import annotations

import pytest

from harness.topology.fibre import FIBRE_US_PER_KM, one_way_delay_us
from harness.topology.units import (
    format_duration_us,
    format_rate_bps,
    parse_duration_us,
    parse_percent,
    parse_rate_bps,
)


@pytest.mark.parametrize(("text", "us"), [("200us", 200), ("5ms", 5000), ("1s", 1e6),
                                          ("500ns", 0.5), ("0.5ms", 500), ("20µs", 20)])
def test_durations(text: str, us: float) -> None:
    assert parse_duration_us(text) == pytest.approx(us)


@pytest.mark.parametrize("text", ["5", "5 parsecs", "ms", "-5ms", "5 m s", "", "1e3us"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration_us(text)


@pytest.mark.parametrize(("text", "bps"), [("10Gbit", 10**10), ("100mbit", 10**8),
                                           ("1.5Kbit", 1500), ("400gbit/s", 4 * 10**11)])
def test_rates(text: str, bps: int) -> None:
    assert parse_rate_bps(text) == bps


def test_bps_is_refused_with_a_reason() -> None:
    with pytest.raises(ValueError, match="bytes/s"):
        parse_rate_bps("10Gbps")


def test_percent() -> None:
    assert parse_percent("0.1%") == pytest.approx(0.1)
    for bad in ("10", "101%", "x%"):
        with pytest.raises(ValueError):
            parse_percent(bad)


def test_formatting_round_trips() -> None:
    assert format_duration_us(parse_duration_us("5ms")) == "5ms"
    assert format_duration_us(200) == "200us"
    assert format_rate_bps(parse_rate_bps("10Gbit")) == "10Gbit"


def test_fibre_constant_is_about_five_us_per_km() -> None:
    assert 4.85 < FIBRE_US_PER_KM < 4.95
    assert one_way_delay_us(40) == pytest.approx(195.9, abs=0.5)  # a 40 km sub-region link
    assert one_way_delay_us(1000) == pytest.approx(4897, abs=5)
