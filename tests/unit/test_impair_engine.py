"""The userspace engine's timer wheel and chance decisions, run without sockets or root.

`fl-impair simulate` feeds arrival times through the same code the forwarder runs and prints
when each frame would leave, so order, delay, jitter, rate, loss and limits are checked exactly.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from itertools import pairwise

import pytest

from harness.links.impair import engine
from harness.nodes.switch.sai import headroom
from harness.topology.fibre import FIBRE_US_PER_KM
from harness.topology.plan import Impairment, Lossless

WHEEL_REVOLUTION_NS = (1 << 16) << 12


def simulate(arrivals: list[tuple[int, int]], *params: str) -> tuple[list[tuple[int, int]],
                                                                      dict[str, int]]:
    text = "".join(f"{t} {size}\n" for t, size in arrivals)
    out = subprocess.run([str(engine.binary()), "simulate", *params], input=text,
                         capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    stats = dict(item.split("=") for item in lines[-1].removeprefix("stats ").split())
    sent = [tuple(map(int, line.split())) for line in lines[:-1]]
    return sent, {k: int(v) for k, v in stats.items()}  # type: ignore[misc]


def test_fixed_delay_is_exact_and_keeps_order() -> None:
    arrivals = [(i * 1000, 100) for i in range(5000)]
    sent, stats = simulate(arrivals, "delay_ns=200000")
    assert [index for index, _ in sent] == list(range(5000))
    assert all(due == arrivals[i][0] + 200_000 for i, due in sent)
    assert stats["tx"] == stats["rx"] == 5000 and stats["queued"] == 0


def test_delay_longer_than_a_wheel_revolution() -> None:
    """Frames due after more than one revolution wait their rounds, not one slot's time."""
    delay = WHEEL_REVOLUTION_NS * 2 + 12345
    arrivals = [(i * 7_000_000, 64) for i in range(200)]
    sent, _ = simulate(arrivals, f"delay_ns={delay}")
    assert [due for _, due in sent] == [t + delay for t, _ in arrivals]


def test_jitter_is_uniform_around_the_delay() -> None:
    arrivals = [(i * 100_000, 100) for i in range(20000)]
    sent, _ = simulate(arrivals, "delay_ns=1000000", "jitter_ns=100000", "seed=7")
    delays = [due - arrivals[i][0] for i, due in sent]
    assert min(delays) >= 900_000 and max(delays) <= 1_100_000
    assert abs(sum(delays) / len(delays) - 1_000_000) < 2_000
    quarters = Counter((d - 900_000) * 4 // 200_001 for d in delays)
    assert all(abs(quarters[q] - 5000) < 400 for q in range(4))  # flat, not bell-shaped


def test_departures_are_in_due_order_under_jitter() -> None:
    arrivals = [(i * 1000, 100) for i in range(5000)]
    sent, _ = simulate(arrivals, "delay_ns=50000", "jitter_ns=40000", "seed=3")
    dues = [due for _, due in sent]
    # Within one 4.096 us slot frames keep arrival order; across slots, due order.
    assert all(b >= a - 4096 for a, b in pairwise(dues))


@pytest.mark.parametrize("loss", [1.0, 10.0, 50.0])
def test_loss_rate(loss: float) -> None:
    n = 100_000
    sent, stats = simulate([(i * 1000, 100) for i in range(n)], f"loss_pct={loss}", "seed=11")
    assert stats["lost"] + len(sent) == n
    assert abs(100 * stats["lost"] / n - loss) < 0.5


def test_loss_extremes() -> None:
    arrivals = [(i * 1000, 100) for i in range(1000)]
    assert simulate(arrivals, "loss_pct=0")[1]["lost"] == 0
    assert simulate(arrivals, "loss_pct=100")[1]["tx"] == 0


def test_duplicates_are_extra_copies() -> None:
    n = 50_000
    sent, stats = simulate([(i * 1000, 100) for i in range(n)], "duplicate_pct=5", "seed=5")
    copies = Counter(index for index, _ in sent)
    assert len(sent) == n + stats["duplicated"]
    assert set(copies.values()) <= {1, 2}
    assert abs(100 * stats["duplicated"] / n - 5) < 0.4


def test_rate_serialises_then_propagates() -> None:
    """1500-byte frames at 12 Mbit/s take 1 ms each on the wire, then 10 us of fibre."""
    sent, _ = simulate([(0, 1500)] * 5, "rate_bps=12000000", "delay_ns=10000")
    assert [due for _, due in sent] == [k * 1_000_000 + 10_000 for k in range(1, 6)]


def test_limit_drops_what_does_not_fit() -> None:
    sent, stats = simulate([(0, 100)] * 100, "delay_ns=1000000", "limit=30")
    assert len(sent) == 30 and stats["overlimit"] == 70


def test_bad_parameters_are_refused() -> None:
    for bad in ("loss_pct=101", "delay_ns=-1", "delay_ns=5ms", "colour=red", "delay_ns",
                "batch=2"):
        out = subprocess.run([str(engine.binary()), "simulate", bad], input="",
                             capture_output=True, text=True)
        assert out.returncode == 2, bad
        assert "fl-impair:" in out.stderr


def test_the_baselines_settings_are_the_engines_own_keys() -> None:
    """FRAME_AT_A_TIME and BATCHED, which the benches send live, parse as the engine's keys
    (a typo would only show as a refused `set` in the middle of a bench)."""
    for settings in (engine.FRAME_AT_A_TIME, engine.BATCHED, "batch_ns=0"):
        sent, stats = simulate([(0, 100)], "delay_ns=1000", *settings.split())
        assert sent == [(0, 1000)] and stats["tx"] == 1, settings


def test_engine_args_units() -> None:
    imp = Impairment(delay_us=195.8689, jitter_us=20, loss_pct=0.1, rate_bps=10**10)
    assert engine.engine_args(imp) == ["delay_ns=195869", "jitter_ns=20000", "loss_pct=0.1",
                                       "duplicate_pct=0.0", "rate_bps=10000000000",
                                       "pfc_xoff=0"]
    pfc = imp.model_copy(update={"lossless": Lossless(xoff=5000, headroom=9000,
                                                      drain_bps=10**9, dscp=26)})
    assert engine.engine_args(pfc)[-4:] == ["pfc_xoff=5000", "pfc_headroom=9000",
                                            "pfc_drain_bps=1000000000", "pfc_dscp=26"]


# The lossless class: a burst at line rate into a far port that forwards at a twentieth of it.
RATE, DRAIN, XOFF, FRAME, BURST = 100_000_000, 5_000_000, 30_000, 1500, 1500


def lossless_burst(km: float, headroom_km: float) -> tuple[list[tuple[int, int]],
                                                           dict[str, int]]:
    return simulate([(0, FRAME)] * BURST, f"delay_ns={round(km * FIBRE_US_PER_KM * 1000)}",
                    f"rate_bps={RATE}", f"pfc_xoff={XOFF}", f"pfc_drain_bps={DRAIN}",
                    f"pfc_headroom={headroom.for_km(headroom_km, RATE, FRAME).bytes}")


@pytest.mark.parametrize("km", [2, 40, 400])
def test_headroom_sized_for_the_cable_loses_nothing(km: float) -> None:
    """What arrives after XOFF is what was on the cable both ways: the PAUSE reaches the
    sender one length later, so the peak over XOFF is about 2 x delay x rate, and fits."""
    sent, stats = lossless_burst(km, km)
    assert stats["pfc_dropped"] == 0 and len(sent) == BURST and stats["pfc_pauses"] > 0
    in_flight = 2 * km * FIBRE_US_PER_KM / 1e6 * RATE / 8
    assert in_flight - 2 * FRAME <= stats["pfc_peak"] - XOFF
    assert stats["pfc_peak"] <= XOFF + headroom.for_km(km, RATE, FRAME).bytes
    gaps = {b - a for (_, a), (_, b) in pairwise(sent)}
    assert min(gaps) == FRAME * 8 * 10**9 // DRAIN  # the far port forwards at its own rate


def test_headroom_sized_for_a_shorter_cable_drops() -> None:
    sent, stats = lossless_burst(40, 2)
    assert stats["pfc_dropped"] > 0 and len(sent) == BURST - stats["pfc_dropped"]


def test_a_lossless_class_needs_a_line_rate_and_a_drain_rate() -> None:
    out = subprocess.run([str(engine.binary()), "simulate", "pfc_xoff=1000"], input="",
                         capture_output=True, text=True)
    assert out.returncode == 2 and "needs rate_bps and pfc_drain_bps" in out.stderr


def test_the_sender_resumes_one_cable_delay_after_xon() -> None:
    """XON travels back one cable length like XOFF, so the first frame after a pause reaches
    the far port a whole round trip (plus its own serialisation) after the XON left, and
    leaves it one drain time later. On a 4,000 km cable that round trip (40 ms) outlasts the
    half-XOFF the far port still holds at XON (10 frames, 24 ms), so the departures show
    the gap, to the nanosecond in `simulate`. A sender resumed at the XON itself, or one
    cable late each way, leaves another gap."""
    delay_ns = round(4000 * FIBRE_US_PER_KM * 1000)
    sent, stats = simulate([(0, FRAME)] * 1000, f"delay_ns={delay_ns}", f"rate_bps={RATE}",
                           f"pfc_xoff={XOFF}", f"pfc_drain_bps={DRAIN}", "pfc_headroom=10000000")
    assert stats["pfc_dropped"] == 0 and stats["pfc_pauses"] >= 1 and len(sent) == 1000
    drain_ns = FRAME * 8 * 10**9 // DRAIN
    serialise_ns = FRAME * 8 * 10**9 // RATE
    departures = [due for _, due in sent]
    resumed = next(i for i, (a, b) in enumerate(pairwise(departures), 1) if b - a > drain_ns)
    held_at_xon = XOFF // 2 // FRAME  # queued once the far port is at or below XON
    xon = departures[resumed - 1 - held_at_xon]  # the departure that crossed XON
    assert departures[resumed] - xon == 2 * delay_ns + serialise_ns + drain_ns
