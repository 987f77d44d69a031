"""The spray ruleset as the kernel reads it: each script is loaded by nft into a throwaway user
and network namespace (`unshare -rn`, no root needed) and read back as JSON, so the plane each
round-robin slot marks comes from nft's own parser, not from the generator's text. Broken
rulesets (a plane given two slots, a bad hook, a typo) must be caught."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from typing import Any

import pytest

from harness.spray.ruleset import MARK_BASE, nft_ruleset

ALL = {p: f"10.1.0.{2 * p + 1}" for p in range(8)}
MARKED_PASS = [{"match": {"op": "!=", "left": {"meta": {"key": "mark"}}, "right": 0}},
               {"accept": None}]


def load_in_kernel(script: str) -> list[dict[str, Any]]:
    out = subprocess.run(["unshare", "-rn", "sh", "-c", "nft -f - && nft -j list ruleset"],
                         input=script, capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise ValueError(out.stderr.strip())
    return json.loads(out.stdout)["nftables"]


def sprayed_planes(items: list[dict[str, Any]]) -> dict[str, Counter[int]]:
    """Destination -> how many round-robin slots each plane gets, as the kernel holds it."""
    slots: dict[str, Counter[int]] = {}
    targets: dict[str, str] = {}
    hooks = []
    for item in items:
        if "chain" in item and "hook" in item["chain"]:
            hooks.append((item["chain"]["type"], item["chain"]["hook"]))
        for expr in item.get("rule", {}).get("expr", []):
            if "mangle" in expr:
                mapping = expr["mangle"]["value"]["map"]
                mod = mapping["key"]["numgen"]["mod"]
                pairs = mapping["data"]["set"]
                assert sorted(slot for slot, _ in pairs) == list(range(mod))
                slots[item["rule"]["chain"]] = Counter(mark - MARK_BASE for _, mark in pairs)
            if "vmap" in expr:
                for dst, verdict in expr["vmap"]["data"]["set"]:
                    targets[dst] = verdict["jump"]["target"]
    assert hooks == [("route", "output")], hooks  # a mark set here re-routes the packet
    return {dst: slots[chain] for dst, chain in targets.items()}


def test_every_destination_gets_each_of_its_planes_exactly_once() -> None:
    without_3 = {p: gw for p, gw in ALL.items() if p != 3}
    wanted = {"10.0.0.26": ALL, "10.0.0.27": without_3, "10.0.0.28": without_3,
              "fd00::1": {0: "fe80::1", 5: "fe80::2"}}
    seen = sprayed_planes(load_in_kernel(nft_ruleset(wanted)))
    assert seen == {dst: Counter(hops.keys()) for dst, hops in wanted.items()}


def test_an_empty_spray_set_loads_and_sprays_nothing() -> None:
    items = load_in_kernel(nft_ruleset({"10.0.0.1": {}}))
    assert sprayed_planes(items) == {}
    assert [i["rule"]["expr"] for i in items if "rule" in i] == [MARKED_PASS]


def test_a_packet_already_steered_to_a_plane_is_left_alone() -> None:
    """Probes carry their plane's mark: the first rule, before any spraying, lets them pass."""
    items = load_in_kernel(nft_ruleset({"10.0.0.26": ALL}))
    first = next(i["rule"] for i in items if "rule" in i and i["rule"]["chain"] == "out")
    assert first["expr"] == MARKED_PASS


def test_a_plane_given_two_slots_is_caught() -> None:
    broken = nft_ruleset({"10.0.0.26": ALL}).replace(f"7 : {MARK_BASE + 7:#x}",
                                                       f"7 : {MARK_BASE + 6:#x}")
    seen = sprayed_planes(load_in_kernel(broken))
    assert seen["10.0.0.26"] != Counter(ALL.keys())


def test_a_wrong_hook_or_a_typo_is_caught() -> None:
    script = nft_ruleset({"10.0.0.26": ALL})
    with pytest.raises(AssertionError):
        sprayed_planes(load_in_kernel(script.replace("type route hook output",
                                                     "type filter hook output")))
    with pytest.raises(ValueError, match=r"syntax error|Could not process"):
        load_in_kernel(script.replace("numgen inc", "numgen incr"))
