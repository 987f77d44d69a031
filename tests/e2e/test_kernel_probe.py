"""Kernel features are probed once per process, in a scratch namespace, however many threads
ask at once: docker's node creation asks from eight threads."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.linux import features as kernel
from harness.linux.nsenter import list_netns

pytestmark = pytest.mark.e2e


def test_threads_asking_at_once_share_one_probe() -> None:
    kernel._probed.cache_clear()  # a fresh process's first asks
    before = set(list_netns())
    with ThreadPoolExecutor(max_workers=8) as pool:
        found = list(pool.map(lambda _: kernel.feature("vrf"), range(8)))
    assert len(set(found)) == 1, found
    assert kernel._probed.cache_info().misses == 1
    assert set(list_netns()) == before  # the probe's namespace is gone
