#!/usr/bin/env python3
"""The nightly run: what is too long for CI's `make test`, one report.

Runs each step as its own process, its output kept whole in reports/nightly-<UTC time>/<step>.log:
every shipped lab deployed, validated and broken in turn (bench/labs.py), the e2e fault suite
(JUnit XML, outage per fault, evidence of a failed test), the stock-kernel VM's suites and the
benches. The report directory then holds junit.xml (every suite of the run, each step a case),
report.json, report.html (tables and plots: latency CDF, busbw against message size, outage per
fault type, convergence per lab, and history when earlier reports are given) and summary.md
(each step's last lines: the figures the benches print). Exits 1 if any step failed.
`make nightly` runs it after installing what the steps need (qemu for the stock-kernel VM,
docker images for the docker runtime) with the earlier reports as history.

    sudo .venv/bin/python bench/nightly.py [--only STEP ...] [--labs clos,...]
        [--history DIR ...] [--report-dir DIR] [--raise-neighbour-limits]
    .venv/bin/python bench/nightly.py --render DIR [--history DIR ...]   # the page again
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from harness.core.build import REPO
from harness.deploy.lab import EVIDENCE_ENV
from harness.testing import html
from harness.testing.junit import Case, merge, suite

PY = sys.executable
REPORT = "{report}"  # in a step's argv: the report directory
FAULT_SUITE = ["tests/e2e/test_fpf.py", "tests/e2e/test_fpf_spine_crash.py",
               "tests/e2e/test_rbb.py", "tests/e2e/test_sai_lab.py",
               "tests/e2e/test_scaleup.py", "tests/e2e/test_fault_cli.py",
               "tests/e2e/test_exercises.py"]
# The VM shares the checkout read-only: what pytest writes goes to the VM's own /tmp.
IN_VM = ["env", "PYTHONDONTWRITEBYTECODE=1", ".venv/bin/python", "-m", "pytest",
         "-p", "no:cacheprovider", "-v", "--color=no", "--fault-report=/tmp/faults.json",
         "--evidence-dir=/tmp/evidence"]


@dataclass(frozen=True)
class Step:
    name: str
    argv: list[str]
    why: str


STEPS = [
    Step("labs", [PY, "bench/labs.py", "--report-dir", REPORT],
         "every shipped lab: deploy and converge, validate, outage per fault type"),
    Step("fault-e2e", [PY, "-m", "pytest", "-v", "--color=no", *FAULT_SUITE,
                       f"--junitxml={REPORT}/fault-e2e.xml",
                       f"--fault-report={REPORT}/fault-e2e-faults.json",
                       f"--evidence-dir={REPORT}/evidence/fault-e2e"],
         "the e2e fault suite: faults under traffic, the fault CLI, the training exercises"),
    # The userspace path runs in CI on this host's CPU; in an emulated one (TCG, where KVM
    # cannot boot the stock kernel) its polling engine measures the emulator, not itself.
    Step("netem-e2e", [PY, "images/vm.py", "--", *IN_VM, "-k", "netem",
                       "tests/e2e/test_impair.py"],
         "the impairment e2e on the sch_netem path, in a VM booted with Debian's stock kernel "
         "(this host's kernel has no netem)"),
    # The RBB lab takes the kernel's SRv6 there on its own (auto); test_rbb checks it did.
    Step("srv6-e2e", [PY, "images/vm.py", "--", *IN_VM, "-k", "kernel or test_rbb",
                      "tests/e2e/test_srv6_dataplane.py", "tests/e2e/test_rbb.py"],
         "the SRv6 dataplane e2e and the RBB lab e2e on the kernel's seg6, seg6local and VRF, "
         "in the stock-kernel VM (this host's kernel has none: CI runs the userspace path)"),
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
    Step("congestion", [PY, "bench/congestion.py"],
         "incast with and without PFC, cable headroom, congestion spreading, ECN against WRED"),
    Step("transport", [PY, "bench/transport.py"],
         "RDMA transports: a loss sweep, paths 10x apart, an 8:1 incast with DCQCN and "
         "without PFC, a gray-failed plane, one engine's packets/s"),
    Step("scale", [PY, "bench/scale.py"],
         "FPF labs of growing size: cost per node, growth exponents, the largest that converges"),
]
TAIL_LINES = 15


def run(step: Step, report: Path, extra: list[str]) -> tuple[int, float, list[str]]:
    log = report / f"{step.name}.log"
    argv = [a.replace(REPORT, str(report)) for a in step.argv] + extra
    started = time.monotonic()
    env = {**os.environ, EVIDENCE_ENV: str(report / "evidence" / step.name)}
    with log.open("w") as out:
        status = subprocess.run(argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env).returncode
    lines = log.read_text(errors="replace").splitlines()
    return status, time.monotonic() - started, lines[-TAIL_LINES:]


def host() -> str:
    return (f"{platform.node()}: Linux {platform.release()}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}")


def write_report(report_dir: Path, steps: list[dict], earlier: list[dict]) -> dict:
    """junit.xml, report.json and report.html from what the steps left in `report_dir`."""
    own = suite("nightly.steps", [
        Case("nightly", s["name"], s["seconds"],
             failure=f"exit {s['exit']}" if s["exit"] else None, detail="\n".join(s["tail"]))
        for s in steps])
    totals = merge(report_dir / "junit.xml", own,
                   sorted(p for p in report_dir.glob("*.xml") if p.name != "junit.xml"))
    labs = report_dir / "labs.json"
    lab_results = json.loads(labs.read_text())["labs"] if labs.exists() else []
    faults = [r for lab in lab_results for r in lab.get("faults", [])]
    for path in sorted(report_dir.glob("*-faults.json")):
        faults += json.loads(path.read_text())["results"]
    report = {"stamp": report_dir.name.removeprefix("nightly-"), "host": host(),
              "steps": steps, "labs": lab_results, "faults": faults, "junit": totals}
    (report_dir / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    (report_dir / "report.html").write_text(html.render(report, earlier))
    return report


def earlier_reports(dirs: list[Path], this: Path) -> list[dict]:
    """The reports of earlier runs, oldest first (by their stamps); ones without a report.json
    (a run cut short) are left out."""
    found = [json.loads((d / "report.json").read_text()) for d in dirs
             if d.resolve() != this.resolve() and (d / "report.json").is_file()]
    return sorted(found, key=lambda r: r["stamp"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=[s.name for s in STEPS], metavar="STEP",
                        help=f"run these steps only: {', '.join(s.name for s in STEPS)}")
    parser.add_argument("--labs", help="the labs step's labs (default: every shipped one)")
    parser.add_argument("--raise-neighbour-limits", action="store_true",
                        help="let the labs step raise the host's neighbour tables for labs "
                        "that need it (fpf-64); without it they are reported as skipped")
    parser.add_argument("--history", nargs="*", type=Path, default=[], metavar="DIR",
                        help="earlier report directories, plotted as history")
    parser.add_argument("--report-dir", type=Path, help="default: reports/nightly-<UTC time>")
    parser.add_argument("--render", type=Path, metavar="DIR",
                        help="write DIR's report.html again (with --history), run nothing")
    args = parser.parse_args()
    if args.render:
        report = json.loads((args.render / "report.json").read_text())
        (args.render / "report.html").write_text(
            html.render(report, earlier_reports(args.history, args.render)))
        print(f"nightly: {args.render / 'report.html'}")
        return 0
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    report_dir = args.report_dir or REPO / "reports" / f"nightly-{stamp}"
    report_dir.mkdir(parents=True, exist_ok=True)
    extra = {"labs": ([f"--labs={args.labs}"] if args.labs else []) +
             (["--raise-neighbour-limits"] if args.raise_neighbour_limits else [])}
    summary = [f"# fabric-lab nightly {stamp}", "", "| step | exit | duration | what |",
               "|---|---|---|---|"]
    tails, steps = [], []
    for step in (s for s in STEPS if not args.only or s.name in args.only):
        print(f"nightly: {step.name}: {step.why} ...", flush=True)
        status, took, tail = run(step, report_dir, extra.get(step.name, []))
        verdict = "ok" if status == 0 else f"FAILED (exit {status})"
        print(f"nightly: {step.name}: {verdict} in {took:.0f} s "
              f"({report_dir / step.name}.log)", flush=True)
        steps.append({"name": step.name, "exit": status, "seconds": round(took, 1),
                      "why": step.why, "log": f"{step.name}.log", "tail": tail})
        summary.append(f"| {step.name} | {status} | {took:.0f} s | {step.why} |")
        tails += ["", f"## {step.name}", "", "```", *tail, "```"]
    (report_dir / "summary.md").write_text("\n".join(summary + tails) + "\n")
    write_report(report_dir, steps, earlier_reports(args.history, report_dir))
    failed = [s["name"] for s in steps if s["exit"]]
    print(f"nightly: report {report_dir / 'report.html'}; "
          + (f"failed: {', '.join(failed)}" if failed else "every step passed"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
