"""The project's one way to summarise samples, for flows, tests, benches and reports.

Percentiles are nearest-rank: the smallest sample with at least p% of the samples at or below
it. Every reported p99 is a delay that really happened, and a reader can check it by hand;
it is numpy's `inverted_cdf` method. A figure from repeated runs is quoted as its spread:
median and min-max.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass


def percentile(values: Iterable[float], pct: float) -> float:
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of no samples")
    if not 0 <= pct <= 100:
        raise ValueError(f"percentile {pct} is not in [0, 100]")
    rank = max(1, math.ceil(pct / 100 * len(ordered) - 1e-9))
    return ordered[rank - 1]


@dataclass(frozen=True)
class Spread:
    median: float
    low: float
    high: float
    runs: int

    def format(self, fmt: str = ".2f", unit: str = "") -> str:
        return (f"median {self.median:{fmt}}{unit} (from {self.low:{fmt}} to "
                f"{self.high:{fmt}}{unit}, {self.runs} runs)")


def spread(values: Iterable[float]) -> Spread:
    samples = list(values)
    return Spread(statistics.median(samples), min(samples), max(samples), len(samples))
