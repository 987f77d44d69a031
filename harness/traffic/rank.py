"""One rank of a validation run (`labctl validate`): a full mesh of TCP connections to its
peers, then the run's point-to-point tests and collectives, each timed and its result checked.

Usage: python -m harness.traffic.rank SPEC_FILE NAME

The spec (JSON, harness/validation/run.py writes it): members [{name, group, addr}], port,
timeout, pairs [[a, b]], pings, stream_bytes, tests [{collective, size, iterations}]. The
result goes beside it as NAME.json. Every timed step starts at a barrier, so all ranks time the
same operation; pairs run one at a time while the other ranks wait at the next barrier, so a
pair measures its path, not its neighbours' traffic.
"""

from __future__ import annotations

import json
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from harness.linux.files import replace_file
from harness.traffic.collective import COLLECTIVES, ITEM, Member, contribution
from harness.traffic.replica import EpochMesh, Inbox, read_exactly

PING_BYTES = 64
STREAM_CHUNK = 1 << 20


def barrier(mesh: EpochMesh, me: str, names: list[str]) -> None:
    peers = [p for p in names if p != me]
    mesh.exchange(dict.fromkeys(peers, b""), peers)


def ping(sock: socket.socket, count: int) -> list[float]:
    """Round trips of PING_BYTES, in microseconds."""
    payload, rtts = bytes(PING_BYTES), []
    for _ in range(count):
        started = time.perf_counter_ns()
        sock.sendall(payload)
        read_exactly(sock, PING_BYTES)
        rtts.append((time.perf_counter_ns() - started) / 1000)
    return rtts


def echo(sock: socket.socket, count: int) -> None:
    for _ in range(count):
        sock.sendall(read_exactly(sock, PING_BYTES))


def stream(sock: socket.socket, size: int) -> float:
    """Seconds from the first byte sent to the receiver's word that it has all `size`."""
    chunk = memoryview(bytes(STREAM_CHUNK))
    started = time.perf_counter()
    left = size
    while left:
        sent = sock.send(chunk[:min(left, STREAM_CHUNK)])
        left -= sent
    read_exactly(sock, 1)
    return time.perf_counter() - started


def sink(sock: socket.socket, size: int) -> None:
    buffer = bytearray(STREAM_CHUNK)
    left = size
    while left:
        got = sock.recv_into(buffer, min(left, STREAM_CHUNK))
        if not got:
            raise ConnectionError("the streaming peer closed the connection")
        left -= got
    sock.sendall(b"\1")


def point_to_point(mesh: EpochMesh, me: str, names: list[str], spec: dict[str, Any]
                   ) -> list[dict[str, Any]]:
    measured = []
    for a, b in spec["pairs"]:
        barrier(mesh, me, names)
        if me == a:
            sock = mesh.connection(b)
            rtts = ping(sock, spec["pings"])
            seconds = stream(sock, spec["stream_bytes"])
            measured.append({"a": a, "b": b, "rtt_us": rtts, "stream_bytes": spec["stream_bytes"],
                             "stream_seconds": seconds})
        elif me == b:
            sock = mesh.connection(a)
            echo(sock, spec["pings"])
            sink(sock, spec["stream_bytes"])
    return measured


def collective(mesh: EpochMesh, me: str, members: list[Member], test: dict[str, Any]
               ) -> dict[str, Any]:
    """One warm-up then `iterations` timed runs; the warm-up's and the last run's results
    checked against what every rank must hold (computed from the ranks' known inputs)."""
    chosen = COLLECTIVES[test["collective"]]
    names = [m.name for m in members]
    n, index = len(members), names.index(me)
    length = max(test["size"] // ITEM // n, 1) * n  # a multiple of n, as nccl-tests rounds
    seconds, ok = [], True
    for k in range(test["iterations"] + 1):
        vector = contribution(index, k, length)
        barrier(mesh, me, names)
        started = time.perf_counter()
        chosen.run(mesh, me, members, vector)
        took = time.perf_counter() - started
        if k:
            seconds.append(took)
        if k in (0, test["iterations"]):
            inputs = [contribution(j, k, length) for j in range(n)]
            ok = ok and chosen.check(inputs, index, vector)
    return {"collective": chosen.name, "size": length * ITEM, "seconds": seconds, "ok": ok}


def run(spec: dict[str, Any], me: str) -> dict[str, Any]:
    mine = next(m for m in spec["members"] if m["name"] == me)
    family = socket.AF_INET6 if ":" in mine["addr"] else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((mine["addr"], spec["port"]))
    listener.listen(256)
    members = [Member(m["name"], m["group"]) for m in spec["members"]]
    names = [m.name for m in members]
    mesh = EpochMesh(me, 0, {m["name"]: (m["addr"], spec["port"]) for m in spec["members"]},
                     Inbox(listener), spec["timeout"], patient=True)
    try:
        p2p = point_to_point(mesh, me, names, spec)
        tests = [collective(mesh, me, members, test) for test in spec["tests"]]
        barrier(mesh, me, names)  # nobody closes a connection another still reads
    finally:
        mesh.close()
    return {"name": me, "p2p": p2p, "tests": tests}


def main(argv: list[str]) -> int:
    spec_file, me = Path(argv[0]), argv[1]
    spec = json.loads(spec_file.read_text())
    try:
        result = run(spec, me)
    except Exception as exc:  # the coordinator reports it by rank, at once
        result = {"name": me, "error": f"{type(exc).__name__}: {exc}",
                  "trace": traceback.format_exc()}
    replace_file(spec_file.with_name(f"{me}.json"), json.dumps(result))
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
