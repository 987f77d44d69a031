"""How fast an RBB TE policy moves to its fallback and back, against the probes' own bound.

Deploys rbb-mini and, ROUNDS times: a 1,000 packets/s IPv6 flow from campus 1 to campus 2
over the policy's path, bb2-bb3 taken down a second in; the flow's outage (packets lost in a
row, as time) and when its last loss came after the link was down on both ends. Then the link
back up, and how long until the policy is on its path again. Prints each beside the bound the
mechanism sets: (misses + 1) probe intervals to leave (the outage may start as the first end
goes down: plus the fault's time to take both), (misses + 2) to come back.

    sudo .venv/bin/python bench/rbb.py [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
import time

from harness.core.build import REPO
from harness.deploy.lab import Lab, deploy
from harness.faults.injector import Faults
from harness.nodes.switch.agent.client import ask
from harness.traffic.flow import run_flow

POLICY = "v6-c1-to-c2"
LINK = "bb2--bb3"


def active(lab: Lab) -> list[str]:
    status = ask(lab.frr("bb1").workdir, {"cmd": "status"})
    return next(p["active"] for p in status["te"] if p["name"] == POLICY)


def round_trip(lab: Lab, faults: Faults) -> tuple[float, float, float, float]:
    """(outage ms, last loss after the link was down ms, back on the path ms, the fault's
    applying time ms: the loss may start when the first end goes down, that much earlier)."""
    result = run_flow(lab, "campus1-host1", "campus2-host1", ipv6=True, count=3000,
                      rate_pps=1000, actions=[(1.0, "down", lambda: faults.link_down(LINK))])
    fault = faults.history[-1]
    down_s = result.marks["down"] + (fault.applied_ns - fault.injected_ns) / 1e9
    after_ms = ((result.last_loss_s or down_s) - down_s) * 1000
    primary = next(p for p in lab.plan.srv6.policies if p.name == POLICY).path.hops  # type: ignore[union-attr]
    faults.undo(fault)
    started = time.monotonic()
    while active(lab) != primary:
        time.sleep(0.002)
    return (result.outage_ms, after_ms, (time.monotonic() - started) * 1000,
            (fault.applied_ns - fault.injected_ns) / 1e6)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    lab = deploy(REPO / "topologies" / "rbb-mini.yml", name="rbbbench")
    try:
        srv6 = lab.plan.srv6
        assert srv6 is not None
        interval = srv6.probe_interval_us / 1000
        leave, back = (srv6.probe_misses + 1) * interval, (srv6.probe_misses + 2) * interval
        status = ask(lab.frr("bb1").workdir, {"cmd": "status"})
        print(f"SRv6 dataplane: {status['srv6']}; probes every {interval:g} ms, "
              f"{srv6.probe_misses} missed make a path broken")
        faults = Faults(lab)
        rows = [round_trip(lab, faults) for _ in range(args.rounds)]
        applying = max(row[3] for row in rows)
        for name, column, bound in (("outage", 0, leave + applying),
                                    ("last loss after down", 1, leave),
                                    ("back on the path", 2, back)):
            values = [row[column] for row in rows]
            print(f"  {name:22s} median {statistics.median(values):6.1f} ms, max "
                  f"{max(values):6.1f} ms; bound {bound:.1f} ms (ratio of the max "
                  f"{max(values) / bound:.2f})")
        print(f"  (the link took up to {applying:.1f} ms to go down on both ends: the outage's "
              "bound counts it)")
    finally:
        lab.destroy()


if __name__ == "__main__":
    main()
