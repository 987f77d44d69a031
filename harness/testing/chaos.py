"""Kill `labctl deploy` with SIGKILL at seeded random moments, then check `destroy` leaves nothing.

A trial starts a deploy in a fresh process and kills it at a moment drawn uniformly from the
time a whole deploy of the same topology takes (measured first, in the same run), so kills land
in every stage: namespaces, links, FRR start-up, agents, convergence. `labctl destroy` must then
exit 0 and leave no namespace, file or process of the lab, and the host's own state (hoststate:
its links, routes, firewall, sysctls, KSM's switches and ksmd's priority, /etc/frr, /tmp) as it
was before the first deploy. The e2e suite runs a few trials; `bench/chaos.py` runs many. The
seed is printed, so a failing sequence can be replayed.
"""

from __future__ import annotations

import dataclasses
import random
import subprocess
import sys
import time
from pathlib import Path

from harness.testing.hoststate import differences, lab_leftovers, snapshot

LABCTL = [sys.executable, "-m", "harness.cli"]


@dataclasses.dataclass(frozen=True)
class Trial:
    kill_at_s: float
    found: int  # nodes, files and processes of the lab on the host when deploy died
    destroy_rc: int
    destroy_output: str
    left: list[str]
    host_changed: list[str]  # what differs on the host from before the first deploy

    @property
    def clean(self) -> bool:
        return self.destroy_rc == 0 and not self.left and not self.host_changed


def labctl(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """labctl as a user runs it: a fresh process, output captured."""
    return subprocess.run([*LABCTL, *args], capture_output=True, text=True, timeout=timeout)


@dataclasses.dataclass(frozen=True)
class Chaos:
    """Trials of one topology deployed one way: what to run, and what came of it."""

    topology: Path
    name: str
    runtime: str = "netns"
    share_memory: str = "auto"
    seed: int = 1
    span_s: float = 0.0  # what a whole deploy took: kills are drawn from [0, span]
    trials: tuple[Trial, ...] = ()

    @property
    def deploy_argv(self) -> list[str]:
        return ["deploy", str(self.topology), "--name", self.name, "--runtime", self.runtime,
                "--share-memory", self.share_memory]

    @property
    def clean(self) -> bool:
        return all(t.clean for t in self.trials)

    def summary(self) -> str:
        clean = sum(t.clean for t in self.trials)
        lines = [f"chaos: {len(self.trials)} SIGKILLs of `deploy {self.topology.name} --runtime "
                 f"{self.runtime} --share-memory {self.share_memory}` (seed {self.seed}), "
                 "drawn over the "
                 f"{self.span_s:.1f} s a whole deploy took; destroy left nothing after {clean}",
                 f"  the lab had {min(t.found for t in self.trials)}-"
                 f"{max(t.found for t in self.trials)} nodes, files and processes on the host "
                 "when deploy died"]
        for t in self.trials:
            if not t.clean:
                lines.append(f"  killed at {t.kill_at_s:.2f} s: destroy exit {t.destroy_rc}, "
                             f"left {t.left[:5]}, host changed {t.host_changed[:5]} "
                             f"{t.destroy_output.strip()[-300:]}")
        return "\n".join(lines)


def full_deploy_seconds(chaos: Chaos) -> float:
    """One deploy to convergence, timed, then destroyed: the span kills are drawn from."""
    start = time.monotonic()
    out = labctl(*chaos.deploy_argv, timeout=600)
    seconds = time.monotonic() - start
    labctl("destroy", chaos.name)
    if out.returncode != 0:
        raise RuntimeError(f"deploy of {chaos.topology} failed before any kill:\n{out.stderr}")
    return seconds


def kill_during_deploy(chaos: Chaos, kill_at_s: float, host: dict[str, object]) -> Trial:
    proc = subprocess.Popen([*LABCTL, *chaos.deploy_argv],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(kill_at_s)
    proc.kill()
    proc.wait()
    found = len(lab_leftovers(chaos.name))
    out = labctl("destroy", chaos.name)
    return Trial(kill_at_s, found, out.returncode, out.stdout + out.stderr,
                 lab_leftovers(chaos.name), differences(host, snapshot()))


def run(chaos: Chaos, trials: int) -> Chaos:
    """`trials` kills, each followed by destroy; the host is compared after every one."""
    host = snapshot()
    span = full_deploy_seconds(chaos)
    rng = random.Random(chaos.seed)
    return dataclasses.replace(chaos, span_s=span, trials=tuple(
        kill_during_deploy(chaos, rng.uniform(0, span), host) for _ in range(trials)))
