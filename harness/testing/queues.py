"""A SAI switch's queue counters as a test reads them: packets per queue, summed over the
ports a hop may leave by (ECMP or spraying picks one of them per packet)."""

from __future__ import annotations

from harness.deploy.lab import Lab
from harness.nodes.switch.agent.client import ask


def queue_packets(lab: Lab, ports: list[tuple[str, str]]) -> dict[int, int]:
    """Queue -> packets sent, over the (switch, port)s, from the agents' `counters`."""
    sums: dict[int, int] = {}
    for node, port in ports:
        rows = ask(lab.frr(node).workdir, {"cmd": "counters"})
        for queue in next(r for r in rows if r["name"] == port)["queues"]:
            sums[queue["queue"]] = sums.get(queue["queue"], 0) + queue["SAI_QUEUE_STAT_PACKETS"]
    return sums


def sent_per_queue(before: dict[int, int], after: dict[int, int]) -> dict[int, int]:
    return {q: after[q] - before.get(q, 0) for q in after}
