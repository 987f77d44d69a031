"""Helpers for tests that deploy real labs: deploy-once fixtures and a leftovers check."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.lab import Lab
from harness.nodes.frr import FRR_STATE
from harness.paths import frr_pathspace, lab_dir, lab_netns_prefix
from harness.runtime.nsenter import list_netns
from harness.topology.augment import augment
from harness.topology.loader import load_file
from tests.conftest import TOPOLOGIES

LABCTL = [sys.executable, "-m", "harness.cli"]


def leftovers(name: str) -> list[str]:
    """Everything of lab `name` still on the host: namespaces, files, processes."""
    found = [f"netns {n}" for n in list_netns() if n.startswith(lab_netns_prefix(name))]
    if lab_dir(name).exists():
        found.append(f"dir {lab_dir(name)}")
    found += [f"frr state {p}" for p in glob.glob(f"{FRR_STATE}/{frr_pathspace(name, '')}*")]
    found += [f"process {p[:80]}" for p in processes_mentioning(f"{lab_dir(name)}/")]
    return found


def processes_mentioning(marker: str) -> list[str]:
    """'PID: command line' of every process whose command line contains `marker`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmdline:
            found.append(f"{pid}: {cmdline}")
    return found


def labctl(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LABCTL, *args], capture_output=True, text=True, timeout=timeout)


def deploy(topology: str, name: str, timeout: float = 150) -> Lab:
    lab = Lab(augment(load_file(TOPOLOGIES / topology), name))
    lab.deploy(timeout=timeout)
    return lab


@pytest.fixture(scope="module")
def clos_lab() -> Iterator[Lab]:
    lab = deploy("clos.yml", "e2eclos")
    yield lab
    lab.destroy()
