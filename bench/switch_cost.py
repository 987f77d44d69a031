#!/usr/bin/env python3
"""What a SAI switch costs against a plain FRR router: fpf-mini deployed both ways in one run.

For each switch kind (`labctl gen fpf --switch-kind`): deploy-and-converge time, then per
switch the RSS and PSS of its processes and their CPU while the converged lab idles
(utime + stime over --idle seconds, as a share of one core), and the SAI switch's figures as
ratios of the plain router's.

    sudo .venv/bin/python bench/switch_cost.py [--idle 10]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.deploy.lab import Lab  # noqa: E402
from harness.fabrics.fpf import SWITCH_KINDS, FpfParams, plan  # noqa: E402
from harness.testing.footprint import footprint  # noqa: E402
from harness.topology.schema import Role  # noqa: E402


def measure(kind: str, idle_s: float) -> dict[str, float]:
    lab = Lab(plan(FpfParams(leaves_per_plane=2, spines_per_plane=1, hosts=4,
                             host_echo="50ms", switch_kind=kind, name=f"cost{kind}")))
    start = time.monotonic()
    try:
        lab.deploy(timeout=300)
        converged = time.monotonic() - start
        switches = [n.name for n in lab.plan.nodes if n.role is not Role.host]
        cost = footprint(lab, switches, idle_s)
    finally:
        lab.destroy()
    n = len(switches)
    return {"deploy and converge (s)": converged, "processes per switch": cost.processes / n,
            "RSS per switch (MiB)": cost.rss_mib / n, "PSS per switch (MiB)": cost.pss_mib / n,
            "idle CPU per switch (% of a core)": 100 * cost.cpu_cores / n}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=float, default=10.0, metavar="S")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/switch_cost.py needs root")
    results = {kind: measure(kind, args.idle) for kind in reversed(SWITCH_KINDS)}
    frr, sai = results["frr"], results["sai"]
    print(f"fpf-mini (24 switches, 4 hosts), idle window {args.idle:.0f} s")
    print(f"{'':36} {'frr':>8} {'sai':>8} {'sai/frr':>8}")
    for key in frr:
        print(f"{key:36} {frr[key]:8.2f} {sai[key]:8.2f} {sai[key] / frr[key]:7.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
