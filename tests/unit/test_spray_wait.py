"""wait_spray on a big lab: each poll reads only the hosts still wrong, and it returns only
once one full read finds every pair right at the same time."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from harness.core.errors import LabError
from harness.spray import nic

HOSTS = ["h1", "h2", "h3"]
WANT = {(a, b): {0, 1} for a in HOSTS for b in HOSTS if a != b}


# All wait_spray asks of the lab itself: its name, and its hosts (none: `want` is given).
LAB = SimpleNamespace(plan=SimpleNamespace(name="lab", nodes=[]))


def fabric(monkeypatch: pytest.MonkeyPatch,
           planes: Callable[[str, int], dict[str, set[int]]]) -> list[str]:
    """planes(host, nth read of that host) -> what it sprays; returns the hosts read, in order."""
    reads: list[str] = []

    def planes_to_hosts(lab: Any, host: str) -> dict[str, set[int]]:
        reads.append(host)
        return planes(host, reads.count(host))
    monkeypatch.setattr(nic, "planes_to_hosts", planes_to_hosts)
    monkeypatch.setattr(nic, "WAIT_POLL_S", 0.0)
    return reads


def everywhere(host: str) -> dict[str, set[int]]:
    return {peer: {0, 1} for peer in HOSTS if peer != host}


def test_polls_read_only_the_hosts_still_wrong(monkeypatch: pytest.MonkeyPatch) -> None:
    late = {"h1": 1, "h2": 1, "h3": 4}  # h3 sprays on both planes from its 4th read on
    reads = fabric(monkeypatch, lambda host, nth: everywhere(host) if nth >= late[host]
                   else {peer: {0} for peer in HOSTS if peer != host})
    nic.wait_spray(LAB, WANT, timeout=5)  # type: ignore[arg-type]
    assert sorted(reads[:3]) == HOSTS, "the first poll reads every host"
    assert reads[3:6] == ["h3"] * 3, "then only the one still wrong"
    assert sorted(reads[6:]) == HOSTS, "and one full read confirms"


def test_a_host_that_went_wrong_meanwhile_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """h1 is right at first, wrong on the confirming read (a plane flapped), right after."""
    reads = fabric(monkeypatch, lambda host, nth: {peer: {1} for peer in HOSTS if peer != host}
                   if (host, nth) in {("h1", 2), ("h3", 1)} else everywhere(host))
    nic.wait_spray(LAB, WANT, timeout=5)  # type: ignore[arg-type]
    assert reads[3:4] == ["h3"] and sorted(reads[4:7]) == HOSTS and reads[7:8] == ["h1"]
    assert sorted(reads[8:]) == HOSTS


def test_a_host_that_never_sprays_everywhere_fails_naming_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fabric(monkeypatch, lambda host, nth: {peer: {0} for peer in HOSTS if peer != host}
           if host == "h2" else everywhere(host))
    with pytest.raises(LabError, match=r"h2->h1: planes \[0\], want \[0, 1\]; "
                       r"h2->h3: planes \[0\], want \[0, 1\]$"):
        nic.wait_spray(LAB, WANT, timeout=0.05)  # type: ignore[arg-type]
