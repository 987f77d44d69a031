"""PFC headroom (harness/nodes/switch/sai/headroom.py) against the sum worked by hand."""

from __future__ import annotations

import pytest

from harness.nodes.switch.sai.headroom import DEFAULT_MTU, Headroom, for_km
from harness.topology.fibre import FIBRE_US_PER_KM

G = 1_000_000_000


def test_headroom_is_the_round_trip_and_response_at_line_rate_plus_a_frame_each_end() -> None:
    """40 km at 400G: 2 x 196 us + 1 us of bytes at 50 GB/s, and two 9216-byte frames."""
    one_way = 40 * FIBRE_US_PER_KM
    expected = (2 * one_way + 1) * 1e-6 * 400 * G / 8 + 2 * DEFAULT_MTU
    assert for_km(40, 400 * G).bytes == pytest.approx(expected, abs=1)
    assert for_km(40, 400 * G).km == pytest.approx(40)


def test_it_grows_with_the_length_and_the_rate() -> None:
    sizes = [for_km(km, 400 * G).bytes for km in (2, 40, 400)]
    assert sizes == sorted(sizes) and sizes[2] > 9 * sizes[1]
    assert for_km(40, 800 * G).bytes > for_km(40, 400 * G).bytes
    assert Headroom(0.0, 400 * G).bytes == 50_000 + 2 * DEFAULT_MTU  # the response alone
