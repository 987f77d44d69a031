"""Kill `labctl deploy` with SIGKILL at seeded random moments, then check `destroy` leaves nothing.

A trial starts a deploy in a fresh process and kills it at a moment drawn uniformly from the
time a whole deploy of the same topology takes (measured first, in the same run), so kills land
in every stage: namespaces, links, FRR start-up, agents, convergence. `labctl destroy` must then
exit 0 and leave no namespace, file or process of the lab. The e2e suite runs a few trials;
`bench/chaos.py` runs many. The seed is printed, so a failing sequence can be replayed.
"""

from __future__ import annotations

import random
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness.testing.hoststate import lab_leftovers

LABCTL = [sys.executable, "-m", "harness.cli"]


@dataclass(frozen=True)
class Trial:
    kill_at_s: float
    found: int  # nodes, files and processes of the lab on the host when deploy died
    destroy_rc: int
    destroy_output: str
    left: list[str]

    @property
    def clean(self) -> bool:
        return self.destroy_rc == 0 and not self.left


def labctl(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """labctl as a user runs it: a fresh process, output captured."""
    return subprocess.run([*LABCTL, *args], capture_output=True, text=True, timeout=timeout)


def deploy_argv(topology: Path, name: str, runtime: str) -> list[str]:
    return ["deploy", str(topology), "--name", name, "--runtime", runtime]


def full_deploy_seconds(topology: Path, name: str, runtime: str) -> float:
    """One deploy to convergence, timed, then destroyed: the span kills are drawn from."""
    start = time.monotonic()
    out = labctl(*deploy_argv(topology, name, runtime), timeout=600)
    seconds = time.monotonic() - start
    labctl("destroy", name)
    if out.returncode != 0:
        raise RuntimeError(f"deploy of {topology} failed before any kill:\n{out.stderr}")
    return seconds


def kill_during_deploy(topology: Path, name: str, runtime: str, kill_at_s: float) -> Trial:
    proc = subprocess.Popen([*LABCTL, *deploy_argv(topology, name, runtime)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(kill_at_s)
    proc.kill()
    proc.wait()
    found = len(lab_leftovers(name))
    out = labctl("destroy", name)
    return Trial(kill_at_s, found, out.returncode, out.stdout + out.stderr, lab_leftovers(name))


def run(topology: Path, name: str, trials: int, seed: int,
        runtime: str = "netns") -> tuple[float, list[Trial]]:
    span = full_deploy_seconds(topology, name, runtime)
    rng = random.Random(seed)
    return span, [kill_during_deploy(topology, name, runtime, rng.uniform(0, span))
                  for _ in range(trials)]


def summary(topology: Path, seed: int, span: float, trials: list[Trial],
            runtime: str = "netns") -> str:
    clean = sum(t.clean for t in trials)
    lines = [f"chaos: {len(trials)} SIGKILLs of `deploy {topology.name} --runtime {runtime}` "
             f"(seed {seed}), drawn "
             f"over the {span:.1f} s a whole deploy took; destroy left nothing after {clean}",
             f"  the lab had {min(t.found for t in trials)}-{max(t.found for t in trials)} "
             "nodes, files and processes on the host when deploy died"]
    for t in trials:
        if not t.clean:
            lines.append(f"  killed at {t.kill_at_s:.2f} s: destroy exit {t.destroy_rc}, left "
                         f"{t.left[:5]} {t.destroy_output.strip()[-300:]}")
    return "\n".join(lines)
