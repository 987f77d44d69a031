"""The pytest plugin (entry point `fabric_lab`): fixtures `lab`, `faults`, `traffic`, and a
failed test's labs archived (`--evidence-dir`) before anything destroys them, beside what the
machine gave the test (harness/testing/machine.py).

`lab` deploys the module's `topology` once and destroys it after the module; `faults`
undoes whatever a test injected and waits until the lab has converged again, so tests of a
module stay independent while paying for one deploy; `traffic` runs measured flows.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.core.errors import LabError
from harness.core.paths import lab_dir
from harness.deploy.converge import wait_converged
from harness.deploy.lab import PLAN_FILE, Lab, deploy, destroy_lab, lab_names
from harness.faults import Faults, evidence
from harness.spray.nic import spraying_hosts, wait_spray
from harness.testing.machine import CpuShare
from harness.testing.plans import plan_from
from harness.testing.report import fault_records, junit_properties, write_report
from harness.traffic.analysis import FlowResult
from harness.traffic.flow import run_flow

# Which runtime the suite's labs run on: `FABRIC_LAB_RUNTIME=docker make test-docker`.
RUNTIME = os.environ.get("FABRIC_LAB_RUNTIME", "netns")
DEPLOY_TIMEOUT_S = 180.0
RECOVER_TIMEOUT_S = 90.0
RECORDS = pytest.StashKey[list]()
_OUTCOME = pytest.StashKey[str]()
_STARTED = pytest.StashKey[float]()
_MACHINE = pytest.StashKey[CpuShare]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--fault-report", default="reports/fault-results.json",
                     help="where fault tests write outage and loss per fault (JSON)")
    parser.addoption("--evidence-dir", default="reports/evidence",
                     help="where a failed test's labs are archived before they are destroyed "
                     "(harness/faults/evidence.py); '' not to archive")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[RECORDS] = []
    config.stash[_STARTED] = time.time()


def pytest_sessionfinish(session: pytest.Session) -> None:
    records = session.config.stash.get(RECORDS, [])
    if records:
        write_report(Path(session.config.rootpath, session.config.getoption("fault_report")),
                     records)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    start = CpuShare.now()
    try:
        return (yield)
    finally:
        item.stash[_MACHINE] = CpuShare.now().since(start)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    report = yield
    if report.when == "call":
        item.stash[_OUTCOME] = report.outcome
    if report.failed and report.when in ("setup", "call"):
        archived = keep_evidence(item)
        if archived:
            report.sections.append(("fabric-lab evidence", "\n".join(map(str, archived))))
        if report.when == "call" and _MACHINE in item.stash:
            report.sections.append(("the machine during the test",
                                    item.stash[_MACHINE].describe()))
    return report


def keep_evidence(item: pytest.Item) -> list[Path]:
    """The labs this session deployed, archived while the failure is still in them (their
    fixtures destroy them later)."""
    option = item.config.getoption("evidence_dir")
    if not option:
        return []
    started = item.config.stash[_STARTED]
    folder = Path(item.config.rootpath, option) / re.sub(r"[^\w.-]+", "_", item.nodeid)
    archived = []
    for name in lab_names():
        plan_file = lab_dir(name) / PLAN_FILE
        with contextlib.suppress(OSError, LabError):
            if plan_file.stat().st_mtime >= started:
                archived.append(evidence.archive(Lab.open(name), folder / name))
    return archived



class Traffic:
    """Flows of one test, kept so the report can pair them with the faults they measured."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        self.results: list[FlowResult] = []

    def flow(self, src: str, dst: str, **options: Any) -> FlowResult:
        result = run_flow(self.lab, src, dst, **options)
        self.results.append(result)
        return result


@pytest.fixture(scope="module")
def topology() -> Any:
    raise pytest.UsageError("the `lab` fixture needs a module-scoped `topology` fixture that "
                            "returns a topology file path or a LabPlan")


@pytest.fixture(scope="module")
def lab(topology: Any) -> Iterator[Lab]:
    plan = plan_from(topology)
    destroy_lab(plan.name)  # leftovers of a killed earlier run of this very test
    lab = deploy(plan, runtime=RUNTIME, timeout=DEPLOY_TIMEOUT_S)  # rolls back if it fails
    try:
        yield lab
    finally:
        lab.destroy()


@pytest.fixture
def traffic(lab: Lab) -> Traffic:
    return Traffic(lab)


@pytest.fixture
def faults(lab: Lab, traffic: Traffic, request: pytest.FixtureRequest) -> Iterator[Faults]:
    injected = Faults(lab)
    try:
        yield injected
    finally:
        try:
            injected.undo_all()
            if injected.history:
                wait_converged(lab, RECOVER_TIMEOUT_S)
                if spraying_hosts(lab.plan):
                    wait_spray(lab, timeout=RECOVER_TIMEOUT_S)
        finally:
            records = fault_records(request.node.nodeid, injected.history, traffic.results,
                                    request.node.stash.get(_OUTCOME, "unknown"))
            request.node.user_properties.extend(junit_properties(records))
            request.config.stash[RECORDS].extend(records)
