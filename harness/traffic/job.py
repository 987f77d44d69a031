"""Training replicas on a lab's hosts: a rendezvous and one replica per host, all-reducing.

    with Training(lab, hosts, algorithm="hierarchical", size=1 << 20, iterations=20) as run:
        run.wait_iteration(3)
        run.kill("r2b1-host1")      # excluded at the iteration it was in
        result = run.wait()

Replicas use the hosts' GPU-facing addresses (loopbacks), so their traffic crosses the fabric
like application traffic; a replica's group is its node's region (then building), which is
what the hierarchical algorithm keeps local. Processes are the runtime's helpers, so destroy
ends them even if a test dies first.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.core.errors import LabError
from harness.core.wait import none_left, wait_until
from harness.linux.processes import kill_and_reap
from harness.topology.plan import LinkPlan
from harness.traffic.collective import ALGORITHMS, ITEM, Member, dry_run
from harness.traffic.counters import link_bytes

if TYPE_CHECKING:
    from harness.runtime.context import LabContext

RENDEZVOUS_PORT, REPLICA_PORT = 7800, 7801


@dataclass(frozen=True)
class Iteration:
    iteration: int
    epoch: int
    members: list[str]
    seconds: float  # the slowest member's time from its order to its checked result
    wall_seconds: float  # at the rendezvous: order sent to last report


@dataclass(frozen=True)
class Restart:
    iteration: int
    epoch: int
    excluded: list[str]
    why: dict[str, str]
    aborts: dict[str, str]


@dataclass(frozen=True)
class TrainingResult:
    algorithm: str
    size: int
    iterations: list[Iteration]
    restarts: list[Restart]
    finished: bool
    error: str | None

    @classmethod
    def read(cls, path: Path) -> TrainingResult:
        raw = json.loads(path.read_text())
        return cls(raw["algorithm"], raw["length"] * ITEM,
                   [Iteration(**i) for i in raw["iterations"]],
                   [Restart(**r) for r in raw["restarts"]], raw["finished"], raw["error"])


def group_of(lab: LabContext, host: str) -> str:
    node = lab.plan.node(host)
    return node.region or node.building or ""


class Training:
    def __init__(self, lab: LabContext, hosts: Sequence[str], *, algorithm: str = "ring",
                 size: int = 1 << 20, iterations: int = 10, timeout: float = 10.0) -> None:
        if algorithm not in ALGORITHMS:
            raise LabError(f"unknown all-reduce {algorithm!r}; known: {', '.join(ALGORITHMS)}")
        if len(hosts) < 2:
            raise LabError("training needs at least 2 replicas")
        self.lab, self.hosts, self.algorithm = lab, list(hosts), algorithm
        self.length, self.iterations, self.timeout = max(size // ITEM, 1), iterations, timeout
        self.dir = lab.dir / "training"
        self.result_path = self.dir / f"{algorithm}-{time.monotonic_ns()}.json"
        self.pids: dict[str, int] = {}  # host -> the replica's pid as its node sees it

    def _address(self, host: str) -> str:
        addr = self.lab.plan.node(host).loopback4
        if not addr:
            raise LabError(f"{host} has no IPv4 loopback to train on")
        return addr

    def __enter__(self) -> Training:
        self.dir.mkdir(exist_ok=True)
        runtime, first = self.lab.runtime, self.hosts[0]
        log = self.result_path.with_suffix(".rendezvous.log")
        self.rendezvous = runtime.spawn(first, runtime.python(
            "harness.traffic.rendezvous", self._address(first), str(RENDEZVOUS_PORT),
            str(len(self.hosts)), str(self.iterations), self.algorithm, str(self.length),
            str(self.timeout), str(self.result_path)), log, "training rendezvous")
        wait_until(lambda: [] if "ready" in log.read_text() else [first], self.timeout,
                   lambda _: LabError(f"training rendezvous on {first} did not start: "
                                      f"{log.read_text()[-300:]}"), until=none_left)
        try:
            for seed, host in enumerate(self.hosts):
                self.pids[host] = runtime.spawn(host, runtime.python(
                    "harness.traffic.replica", host, group_of(self.lab, host), str(seed),
                    self._address(host), str(REPLICA_PORT), self._address(first),
                    str(RENDEZVOUS_PORT), str(self.timeout)),
                    self.result_path.with_suffix(f".{host}.log"), f"training replica {host}")
        except BaseException:
            self.__exit__()
            raise
        return self

    def _record(self) -> TrainingResult | None:
        try:
            return TrainingResult.read(self.result_path)
        except (FileNotFoundError, ValueError):
            return None

    def wait_iteration(self, k: int) -> None:
        """Return once iteration `k` completed."""
        def pending() -> list[str]:
            record = self._record()
            if record and (record.finished or record.error):
                raise LabError(f"training ended before iteration {k}: {record.error}")
            return [] if record and any(i.iteration >= k for i in record.iterations) else [k]
        wait_until(pending, self.timeout * (k + 2), lambda _: LabError(
            f"training did not complete iteration {k} within {self.timeout * (k + 2):g}s"),
            until=none_left)

    def kill(self, host: str) -> None:
        """SIGKILL the replica on `host`, as a crashed training process dies."""
        pid = self.lab.runtime.host_pid(host, self.pids.pop(host))
        if pid is not None:
            os.kill(pid, signal.SIGKILL)

    def wait(self) -> TrainingResult:
        """The finished run's record (iterations, restarts with who was excluded)."""
        wait_until(lambda: [] if (r := self._record()) and r.finished else ["running"],
                   self.timeout * (self.iterations + 4), lambda _: LabError(
                       f"training did not finish; rendezvous log: "
                       f"{self.result_path.with_suffix('.rendezvous.log').read_text()[-300:]}"),
                       until=none_left)
        record = self._record()
        assert record is not None
        return record

    def __exit__(self, *_: object) -> None:
        running = [(self.hosts[0], self.rendezvous), *self.pids.items()]
        kill_and_reap([p for host, pid in running
                       if (p := self.lab.runtime.host_pid(host, pid)) is not None])


@dataclass(frozen=True)
class Measured:
    algorithm: str
    seconds: float  # median iteration
    crossing_bytes: float  # per iteration, on the wire (headers, acks, control included)
    crossing_payload: int  # per iteration, what the algorithm itself sends across groups
    critical_crossings: int  # one-way crossings in a row the slowest replica waits for


def measure(lab: LabContext, hosts: Sequence[str], algorithm: str, *, size: int,
            iterations: int, across: Sequence[LinkPlan]) -> Measured:
    """Train `iterations` all-reduces of `size` bytes; time them and count what crossed
    `across` (e.g. the links between regions) on the interface counters."""
    before = link_bytes(lab, across)
    with Training(lab, hosts, algorithm=algorithm, size=size, iterations=iterations) as run:
        result = run.wait()
    crossed = link_bytes(lab, across) - before
    if result.error or result.restarts:
        raise LabError(f"{algorithm} all-reduce did not run cleanly: "
                       f"{result.error or result.restarts}")
    account = dry_run(algorithm, [Member(h, group_of(lab, h))  # in the rendezvous' order
                                  for h in result.iterations[0].members], size)
    return Measured(algorithm, statistics.median(i.seconds for i in result.iterations),
                    crossed / iterations, account.crossing_bytes(), account.critical_crossings())
