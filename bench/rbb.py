"""What an RBB TE policy carries and how it moves, on rbb-mini, against the same lab's plain
path and the probes' own bounds.

Throughput: one TCP stream (iperf3) from campus 1 to campus 2 over the policy's path (the
userspace SRv6 path where the kernel has none: H.Encaps on bb1, End.X on bb2, End.DT6 on bb3),
then one from campus 1 to the cloud, routed plainly, both through the lab's link delays, PAIRS
times in turn (a 2-core VM's speed drifts between runs); `TCP policy / plain: R`, the median
of the pairs' ratios, with the engines as they run and, in the same run, as they ran before
issue 40 (a frame at a time, the delay engines at a real-time priority).

Stability: a 60 s stream over the policy at full rate; how often the policy moved
(`N policy switches`) and how often a path was judged down (none is down: each is false).

Failover, ROUNDS times: a 1,000 packets/s IPv6 flow over the policy's path, bb2-bb3 taken
down a second in; the flow's outage (packets lost in a row, as time) and when its last loss
came after the link was down on both ends. Then the link back up, and how long until the
policy is on its path again. Each beside the bound the mechanism sets: (misses + 1) probe
intervals to leave (the outage may start as the first end goes down: plus the fault's time to
take both); `probe_up` + 2 to come back (the hold-down is long over by then).

    sudo .venv/bin/python bench/rbb.py [--rounds N] [--seconds S]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from harness.core.build import REPO
from harness.core.stats import spread
from harness.deploy.lab import Lab, deploy
from harness.faults.injector import Faults
from harness.links import impair
from harness.links.impair import engine
from harness.nodes.switch.agent.client import ask
from harness.nodes.switch.sai import srv6_engine
from harness.traffic.flow import run_flow
from harness.traffic.iperf import tcp_bytes_per_s

POLICY = "v6-c1-to-c2"
LINK = "bb2--bb3"
SRC, DST, PLAIN_DST = "campus1-host1", "campus2-host1", "cloud-host1"
ROUTERS = ("bb1", "bb2", "bb3", "bb4")
TCP_SECONDS = 5
PAIRS = 3


def te(lab: Lab) -> dict[str, Any]:
    status = ask(lab.frr("bb1").workdir, {"cmd": "status"})
    return next(p for p in status["te"] if p["name"] == POLICY)


def engines(lab: Lab, frame_at_a_time: bool) -> None:
    """Every delay engine and SRv6 engine of the lab batched, or as before issue 40."""
    for state in impair.states.load_all(lab.dir):
        if state.control is not None:
            engine.configure(state.control,
                             engine.FRAME_AT_A_TIME if frame_at_a_time else engine.BATCHED)
    if status_path(lab) == "userspace":
        for router in ROUTERS:
            reply = srv6_engine.Engine(lab.frr(router).workdir).request(
                f"batch {0 if frame_at_a_time else 1}")
            if reply != "ok":
                raise SystemExit(f"{router}'s SRv6 engine: {reply}")


def status_path(lab: Lab) -> str:
    path = ask(lab.frr("bb1").workdir, {"cmd": "status"})["srv6"]
    return "userspace" if "userspace" in path else "kernel"


def throughput(lab: Lab) -> None:
    for mode, before in (("batched", False), ("before: frame at a time", True)):
        engines(lab, before)
        pairs = [(tcp_bytes_per_s(lab, SRC, DST, TCP_SECONDS),
                  tcp_bytes_per_s(lab, SRC, PLAIN_DST, TCP_SECONDS)) for _ in range(PAIRS)]
        ratio = spread([policy / plain for policy, plain in pairs])
        print(f"  {mode:>24}: TCP over the policy "
              f"{spread([p / 1e9 for p, _ in pairs]).format('.3f', ' GB/s')}, plain "
              f"{spread([q / 1e9 for _, q in pairs]).format('.3f', ' GB/s')}; "
              f"TCP policy / plain: {ratio.median:.2f} (from {ratio.low:.2f} to "
              f"{ratio.high:.2f})")
    engines(lab, False)


def stability(lab: Lab, seconds: float) -> None:
    before = te(lab)
    rate = tcp_bytes_per_s(lab, SRC, DST, seconds)
    after = te(lab)
    downs = sum(b["downs"] - a["downs"] for a, b in zip(before["paths"], after["paths"],
                                                         strict=True))
    print(f"  {seconds:g} s of TCP over the policy at {rate / 1e9:.3f} GB/s: "
          f"{after['moves'] - before['moves']} policy switches, {downs} false path-downs")


def round_trip(lab: Lab, faults: Faults) -> tuple[float, float, float, float]:
    """(outage ms, last loss after the link was down ms, back on the path ms, the fault's
    applying time ms: the loss may start when the first end goes down, that much earlier)."""
    result = run_flow(lab, SRC, DST, ipv6=True, count=3000,
                      rate_pps=1000, actions=[(1.0, "down", lambda: faults.link_down(LINK))])
    fault = faults.history[-1]
    down_s = result.marks["down"] + (fault.applied_ns - fault.injected_ns) / 1e9
    after_ms = ((result.last_loss_s or down_s) - down_s) * 1000
    primary = next(p for p in lab.plan.srv6.policies if p.name == POLICY).path.hops  # type: ignore[union-attr]
    faults.undo(fault)
    started = time.monotonic()
    while te(lab)["active"] != primary:
        time.sleep(0.002)
    return (result.outage_ms, after_ms, (time.monotonic() - started) * 1000,
            (fault.applied_ns - fault.injected_ns) / 1e6)


def failover(lab: Lab, rounds: int) -> None:
    srv6 = lab.plan.srv6
    assert srv6 is not None
    interval = srv6.probe_interval_us / 1000
    leave, back = (srv6.probe_misses + 1) * interval, (srv6.probe_up + 2) * interval
    faults = Faults(lab)
    rows = [round_trip(lab, faults) for _ in range(rounds)]
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=60.0,
                        help="how long the stability stream runs")
    args = parser.parse_args()
    lab = deploy(REPO / "topologies" / "rbb-mini.yml", name="rbbbench")
    try:
        srv6 = lab.plan.srv6
        assert srv6 is not None
        print(f"SRv6 dataplane: {ask(lab.frr('bb1').workdir, {'cmd': 'status'})['srv6']}; "
              f"probes every {srv6.probe_interval_us / 1000:g} ms, {srv6.probe_misses} ticks "
              f"without one back make a path broken, {srv6.probe_up} in a row usable, "
              f"hold-down {srv6.hold_down_us / 1000:g} ms")
        throughput(lab)
        stability(lab, args.seconds)
        failover(lab, args.rounds)
    finally:
        lab.destroy()


if __name__ == "__main__":
    main()
