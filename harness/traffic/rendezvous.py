"""The rendezvous of a training run: orders each all-reduce and excludes replicas that die.

Usage: python -m harness.traffic.rendezvous ADDR PORT REPLICAS ITERATIONS ALGORITHM LENGTH
                                            TIMEOUT RESULT_FILE

Like torchelastic's rendezvous: every replica holds a control connection to it. Per iteration
it sends the membership and an epoch; each member answers done (with its time and whether its
sum was right) or abort (a peer failed under it). A replica whose control connection closes
(it died) or that stays silent past TIMEOUT is excluded: the epoch goes up and the survivors
run the same iteration again without it. After every iteration the whole record is written
to RESULT_FILE (atomically), so a watcher can act at a chosen iteration.
"""

from __future__ import annotations

import json
import selectors
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.linux.files import replace_file

SETTLE_S = 0.5  # after the first failure report, how long the others get to report too
MAX_RESTARTS = 3  # of one iteration: beyond, the network is broken, not a replica


@dataclass
class Replica:
    name: str
    group: str
    seed: int
    addr: str
    port: int
    sock: socket.socket
    buffer: bytes = b""
    alive: bool = True

    def member(self) -> dict[str, object]:
        return {"name": self.name, "group": self.group, "seed": self.seed, "addr": self.addr,
                "port": self.port}


@dataclass
class Record:
    algorithm: str
    length: int
    iterations: list[dict[str, object]] = field(default_factory=list)
    restarts: list[dict[str, object]] = field(default_factory=list)
    finished: bool = False
    error: str | None = None

    def write(self, path: Path) -> None:
        replace_file(path, json.dumps(self.__dict__, indent=1))


def _lines(replica: Replica) -> list[dict[str, object]]:
    """What the replica said since last asked; marks it dead when its connection closed."""
    try:
        got = replica.sock.recv(65536)
    except OSError:
        got = b""
    if not got:
        replica.alive = False
        return []
    replica.buffer += got
    *lines, replica.buffer = replica.buffer.split(b"\n")
    return [json.loads(line) for line in lines]


def gather(listener: socket.socket, replicas: list[Replica], count: int, timeout: float) -> None:
    """Accept replicas into `replicas` until `count` said hello."""
    deadline = time.monotonic() + timeout
    while len(replicas) < count:
        listener.settimeout(max(deadline - time.monotonic(), 0.01))
        sock, _ = listener.accept()
        hello = json.loads(sock.makefile("rb").readline())
        sock.settimeout(None)
        replicas.append(Replica(hello["hello"], hello["group"], hello["seed"], hello["addr"],
                                hello["port"], sock))


def run_iteration(members: list[Replica], order: dict[str, object], timeout: float
                  ) -> dict[str, dict[str, object]]:
    """Send `order`; collect each member's report until all answered, or, once one failed,
    until the rest answered or SETTLE_S passed; silent members are missing from the result."""
    line = json.dumps(order).encode() + b"\n"
    for r in members:
        try:
            r.sock.sendall(line)
        except OSError:
            r.alive = False
    reports: dict[str, dict[str, object]] = {}
    selector = selectors.DefaultSelector()
    for r in members:
        if r.alive:
            selector.register(r.sock, selectors.EVENT_READ, r)
    deadline = time.monotonic() + timeout
    while len(selector.get_map()) and time.monotonic() < deadline:
        for key, _ in selector.select(deadline - time.monotonic()):
            r = key.data
            for report in _lines(r):
                if report.get("epoch") == order["epoch"]:
                    reports[r.name] = report
            if not r.alive or r.name in reports:
                selector.unregister(r.sock)
            failed = any("abort" in x or not x.get("ok", True) for x in reports.values())
            if failed or any(not m.alive for m in members):
                deadline = min(deadline, time.monotonic() + SETTLE_S)
    selector.close()
    return reports


def main(argv: list[str]) -> int:
    addr, port, count, iterations, algorithm, length, timeout_s, result = argv
    timeout, path = float(timeout_s), Path(result)
    record = Record(algorithm, int(length))
    listener = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((addr, int(port)))
    listener.listen(int(count))
    print("ready", flush=True)
    replicas: list[Replica] = []
    try:
        gather(listener, replicas, int(count), 4 * timeout)
    except OSError as exc:
        record.error = f"only {len(replicas)} of {count} replicas joined: {exc}"
        record.write(path)
        return 1
    members = sorted(replicas, key=lambda r: (r.group, r.name))
    epoch, k = 0, 0
    while k < int(iterations):
        order = {"iteration": k, "epoch": epoch, "algorithm": algorithm, "length": int(length),
                 "members": [r.member() for r in members]}
        started = time.monotonic()
        reports = run_iteration(members, order, timeout)
        wrong = [n for n, x in reports.items() if not x.get("ok", True)]
        if wrong:
            record.error = f"iteration {k}: wrong sum at {', '.join(sorted(wrong))}"
            break
        if len(reports) == len(members) and all("done" in x for x in reports.values()):
            record.iterations.append({
                "iteration": k, "epoch": epoch, "members": [r.name for r in members],
                "seconds": max(float(x["seconds"]) for x in reports.values()),
                "wall_seconds": time.monotonic() - started})
            record.write(path)
            k += 1
            continue
        gone = [r for r in members if not r.alive or r.name not in reports]
        members = [r for r in members if r not in gone]
        epoch += 1
        record.restarts.append({
            "iteration": k, "epoch": epoch, "excluded": [r.name for r in gone],
            "why": {r.name: "connection closed" if not r.alive else f"silent for {timeout:g}s"
                    for r in gone},
            "aborts": {n: x.get("why") for n, x in reports.items() if "abort" in x}})
        record.write(path)
        if len(members) < 2:
            record.error = f"iteration {k}: fewer than 2 replicas left"
            break
        if sum(r["iteration"] == k and not r["excluded"] for r in record.restarts) > MAX_RESTARTS:
            record.error = f"iteration {k}: failed {MAX_RESTARTS + 1} times with all alive"
            break
    record.finished = True
    record.write(path)
    for r in members:
        r.sock.close()
    return 0 if record.error is None else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
