"""A profile's checks judged against one validation run: each check passes only when it
measured something and every value it covers is within its bound. Results that are wrong
(a collective leaving a rank other than what it must hold) always fail, whatever the profile.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from harness.validation.profile import P2P_METRICS, Check, Profile
from harness.validation.run import Validation


@dataclass(frozen=True)
class Verdict:
    check: str
    ok: bool
    measured: int  # values the check covered
    failures: list[str]


def _values(check: Check, result: Validation) -> list[tuple[str, float]]:
    if check.metric in P2P_METRICS:
        return [(f"{p.a}->{p.b}", getattr(p, check.metric)) for p in result.pairs]
    return [(f"{r.collective} {r.size} B tier {r.tier} ({r.hosts} hosts)",
             getattr(r, check.metric)) for r in result.rows
            if fnmatchcase(r.collective, check.collective)
            and (check.size is None or r.size == check.size)
            and (check.tier is None or r.tier == str(check.tier))]


def judge(check: Check, result: Validation) -> Verdict:
    scale = result.p2p_GBps if check.relative_to else 1.0
    values = _values(check, result)
    failures = []
    for what, value in values:
        if check.min is not None and value < check.min * scale:
            failures.append(f"{what}: {check.metric} {value:.6g} < {check.min * scale:.6g}")
        if check.max is not None and value > check.max * scale:
            failures.append(f"{what}: {check.metric} {value:.6g} > {check.max * scale:.6g}")
    if not values:
        failures.append("measured nothing this check covers (its collective, size or tier "
                        "was not run)")
    return Verdict(str(check), not failures, len(values), failures)


def correct(result: Validation) -> Verdict:
    wrong = [f"{r.collective} {r.size} B tier {r.tier}" for r in result.rows if not r.ok]
    return Verdict("every rank holds the collective's result", not wrong, len(result.rows),
                   [f"{w}: a rank's result differs from what it must hold" for w in wrong])


def judge_all(profile: Profile, result: Validation) -> list[Verdict]:
    return [correct(result), *(judge(c, result) for c in profile.checks)]
