"""The one percentile: nearest-rank, checked against numpy's `inverted_cdf` (an independent
implementation of the same definition) on random samples."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.stats import percentile, spread

samples = st.lists(st.floats(-1e9, 1e9, allow_nan=False), min_size=1, max_size=200)


@settings(max_examples=400, deadline=None)
@given(samples, st.floats(0, 100))
def test_percentile_is_numpys_inverted_cdf(values: list[float], pct: float) -> None:
    assert percentile(values, pct) == np.percentile(values, pct, method="inverted_cdf")


def test_a_percentile_is_a_sample_and_p100_is_the_max() -> None:
    values = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert percentile(values, 50) == 3.0 and percentile(values, 100) == 5.0
    assert percentile(values, 0) == 1.0 and percentile(values, 20) == 1.0
    assert percentile(values, 21) == 2.0


def test_no_samples_or_a_bad_percentile_is_an_error() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_spread_is_median_and_range() -> None:
    s = spread([3.0, 1.0, 2.0, 10.0])
    assert (s.median, s.low, s.high, s.runs) == (2.5, 1.0, 10.0, 4)
    assert s.format(".1f", " s") == "median 2.5 s (from 1.0 to 10.0 s, 4 runs)"
    assert spread([-1.5, 2.0]).format("+.1f") == "median +0.2 (from -1.5 to +2.0, 2 runs)"
