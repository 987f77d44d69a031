#!/usr/bin/env python3
"""containerlab labs "in seconds": `labctl deploy` of each lab in tests/labs/ (user configs,
binds, exec, FRR images mapped to this host's FRR), timed from the command's start to its
return (converged: every neighbour the configs declare up), against the fabric-lab Clos
(topologies/clos.yml, generated configs) deployed the same way in the same run.

Each deploy is a fresh `labctl` process, `--rounds` times; the median is printed with its
ratio to the Clos baseline. Run as root: `.venv/bin/python bench/clab.py [--runtime docker]`.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LABCTL = [sys.executable, "-m", "harness.cli"]
BASELINE = REPO / "topologies" / "clos.yml"
LABS = sorted((REPO / "tests" / "labs").glob("*/*.clab.yml"))


def labctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LABCTL, *args], capture_output=True, text=True, cwd=REPO,
                          timeout=300)


def deploy_seconds(topology: Path, runtime: str) -> float:
    start = time.monotonic()
    out = labctl("deploy", "-t", str(topology), "--runtime", runtime, "--timeout", "120")
    elapsed = time.monotonic() - start
    destroyed = labctl("destroy", "-t", str(topology))
    if out.returncode != 0 or destroyed.returncode != 0:
        sys.exit(f"{topology.name}: deploy failed:\n{out.stdout[-2000:]}{out.stderr}"
                 f"{destroyed.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", default="netns", choices=("netns", "docker"))
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows = []
    for topology in [BASELINE, *LABS]:
        times = [deploy_seconds(topology, args.runtime) for _ in range(args.rounds)]
        rows.append((topology.relative_to(REPO), statistics.median(times)))
    base = rows[0][1]
    print(f"deploy to converged, {args.runtime}, median of {args.rounds} (fresh labctl each)")
    for name, seconds in rows:
        print(f"  {name!s:55} {seconds:6.2f} s  {seconds / base:5.2f}x the Clos")


if __name__ == "__main__":
    main()
