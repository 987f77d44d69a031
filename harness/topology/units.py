"""Strict parsing of the units a link carries: durations, rates, percentages and sizes.

A bare number is refused on purpose: `delay: 5` could be ms or us, and a wrong guess
would silently turn a 40 km link into a 40,000 km one.
"""

from __future__ import annotations

import re

_NUMBER = r"(?P<value>\d+(?:\.\d+)?|\.\d+)\s*"

_DURATION_US = {"ns": 1e-3, "us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6}
_RATE_BPS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}

_DURATION = re.compile(_NUMBER + r"(?P<unit>ns|us|µs|ms|s)$")
_RATE = re.compile(_NUMBER + r"(?P<unit>[kmgt]?bit)(?:/s)?$", re.IGNORECASE)
_PERCENT = re.compile(_NUMBER + r"%$")
_BYTES = {"b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 10**3, "mb": 10**6,
          "gb": 10**9}
_SIZE = re.compile(_NUMBER + r"(?P<unit>[kmg]i?b|b)$", re.IGNORECASE)


def parse_duration_us(text: object) -> float:
    """'200us' -> 200.0, '5ms' -> 5000.0 (microseconds)."""
    match = _DURATION.match(str(text).strip())
    if not match:
        raise ValueError(f"{text!r} is not a duration; write a number with a unit: "
                         "ns, us, ms or s (e.g. 200us, 5ms)")
    return float(match["value"]) * _DURATION_US[match["unit"]]


def parse_rate_bps(text: object) -> int:
    """'10Gbit' -> 10_000_000_000 (bits per second)."""
    raw = str(text).strip()
    match = _RATE.match(raw)
    if not match:
        hint = " ('bps' means bytes/s in tc, so it is refused)" if "bps" in raw.lower() else ""
        raise ValueError(f"{text!r} is not a rate{hint}; write a number with bit, kbit, mbit, "
                         "gbit or tbit (e.g. 100Mbit, 10Gbit)")
    return int(float(match["value"]) * _RATE_BPS[match["unit"].lower()])


def parse_percent(text: object) -> float:
    """'0.1%' -> 0.1 (percent, 0 to 100)."""
    match = _PERCENT.match(str(text).strip())
    if not match or float(match["value"]) > 100:
        raise ValueError(f"{text!r} is not a percentage; write 0% to 100% (e.g. 0.1%)")
    return float(match["value"])


def parse_bytes(text: object) -> int:
    """'64KiB' -> 65536, '1MB' -> 1000000 (bytes)."""
    match = _SIZE.match(str(text).strip())
    if not match:
        raise ValueError(f"{text!r} is not a size; write a number with B, KiB, MiB, GiB (or "
                         "KB, MB, GB), e.g. 64KiB")
    return int(float(match["value"]) * _BYTES[match["unit"].lower()])


def format_bytes(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale}{unit}"
    return f"{size}B"


def format_duration_us(us: float) -> str:
    if us >= 1000:
        return f"{us / 1000:.4g}ms"
    return f"{us:.4g}us"


def format_rate_bps(bps: int) -> str:
    for unit, scale in (("Tbit", 10**12), ("Gbit", 10**9), ("Mbit", 10**6), ("Kbit", 10**3)):
        if bps >= scale:
            return f"{bps / scale:g}{unit}"
    return f"{bps}bit"
