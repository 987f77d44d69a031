#!/usr/bin/env python3
"""The nightly run: what is too long for CI's `make test`, one report.

Runs each step as its own process, its output kept whole in reports/nightly-<UTC time>/<step>.log,
and writes summary.md there (step, exit status, duration, the step's last lines: the figures
the benches print). Exits 1 if any step failed. `make nightly` runs it after installing what
the steps need (qemu for the stock-kernel VM, docker images for the docker runtime).

    sudo .venv/bin/python bench/nightly.py [--only STEP ...]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable
IN_VM = ["env", "PYTHONDONTWRITEBYTECODE=1", ".venv/bin/python", "-m", "pytest",
         "-p", "no:cacheprovider", "-v", "--color=no"]


@dataclass(frozen=True)
class Step:
    name: str
    argv: list[str]
    why: str


STEPS = [
    # The userspace path runs in CI on this host's CPU; in an emulated one (TCG, where KVM
    # cannot boot the stock kernel) its polling engine measures the emulator, not itself.
    Step("netem-e2e", [PY, "images/vm.py", "--", *IN_VM, "-k", "netem",
                       "tests/e2e/test_impair.py"],
         "the impairment e2e on the sch_netem path, in a VM booted with Debian's stock kernel "
         "(this host's kernel has no netem)"),
    # The RBB lab e2e needs its agents up within 20 s, which an emulated VM does not give
    # them: the dataplane e2e carries the kernel path's behaviours there.
    Step("srv6-e2e", [PY, "images/vm.py", "--", *IN_VM, "-k", "kernel",
                      "tests/e2e/test_srv6_dataplane.py"],
         "the SRv6 dataplane e2e on the kernel's seg6 and seg6local, in the stock-kernel VM "
         "(this host's kernel has none: CI runs the userspace path)"),
    Step("chaos", [PY, "bench/chaos.py", "--trials", "100"],
         "100 SIGKILLs of deploy at random moments, each followed by destroy"),
    Step("deploy", [PY, "bench/deploy.py"], "deploy speed: netns, docker, Mininet, shell"),
    Step("clab", [PY, "bench/clab.py"], "containerlab labs against the Clos baseline"),
    Step("impair", [PY, "bench/impair.py"], "impairment accuracy and throughput"),
    Step("fib", [PY, "bench/fib.py"], "FIB download through the agent against zebra direct"),
    Step("fpf", [PY, "bench/fpf.py"], "fpf-64 deploy and plane failover"),
    Step("srv6", [PY, "bench/srv6.py"], "SRv6 packets/s per engine against plain forwarding"),
    Step("rbb", [PY, "bench/rbb.py", "--rounds", "10"],
         "RBB policy failover to the fallback and back, against the probes' bound"),
    Step("switch-cost", [PY, "bench/switch_cost.py"],
         "a SAI switch against a plain FRR router, fpf-mini both ways"),
    Step("bag", [PY, "bench/bag.py", "--reuse"],
         "bag-mini: lossless bursts against measured headroom, flat vs hierarchical "
         "all-reduce over 5 ms, and how long damped routes take to be reused"),
    Step("scale", [PY, "bench/scale.py"],
         "FPF labs of growing size: cost per node, growth exponents, the largest that converges"),
]
TAIL_LINES = 15


def run(step: Step, logs: Path) -> tuple[int, float, list[str]]:
    log = logs / f"{step.name}.log"
    started = time.monotonic()
    with log.open("w") as out:
        status = subprocess.run(step.argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL).returncode
    lines = log.read_text(errors="replace").splitlines()
    return status, time.monotonic() - started, lines[-TAIL_LINES:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=[s.name for s in STEPS], metavar="STEP",
                        help=f"run these steps only: {', '.join(s.name for s in STEPS)}")
    args = parser.parse_args()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    logs = REPO / "reports" / f"nightly-{stamp}"
    logs.mkdir(parents=True)
    report = [f"# fabric-lab nightly {stamp}", "", "| step | exit | duration | what |",
              "|---|---|---|---|"]
    tails, failed = [], []
    for step in (s for s in STEPS if not args.only or s.name in args.only):
        print(f"nightly: {step.name}: {step.why} ...", flush=True)
        status, took, tail = run(step, logs)
        verdict = "ok" if status == 0 else f"FAILED (exit {status})"
        print(f"nightly: {step.name}: {verdict} in {took:.0f} s ({logs / step.name}.log)",
              flush=True)
        if status:
            failed.append(step.name)
        report.append(f"| {step.name} | {status} | {took:.0f} s | {step.why} |")
        tails += ["", f"## {step.name}", "", "```", *tail, "```"]
    (logs / "summary.md").write_text("\n".join(report + tails) + "\n")
    print(f"nightly: report {logs / 'summary.md'}; "
          + (f"failed: {', '.join(failed)}" if failed else "every step passed"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
