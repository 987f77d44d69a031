"""One rank of a validation run (`labctl validate`): a full mesh of TCP connections to its
peers, then the run's point-to-point tests and collectives, each timed and its result checked.

Usage: python -m harness.traffic.rank SPEC_FILE NAME

The spec (JSON, harness/validation/run.py writes it): members [{name, group, addr}], port,
timeout, pairs [[a, b]], pings, stream_bytes, tests [{collective, size, iterations}], and
optionally rdma {program, settings, nics}: then every payload is an RDMA write over fl-rdma
(harness/traffic/rdma_mesh.py) and TCP carries the barriers only. The result goes beside it
as NAME.json. Every timed step starts at a barrier, so all ranks time the
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
from typing import Any, Protocol

from harness.linux.files import replace_file
from harness.nodes.rdma.engine import Dcqcn, Nic, Settings
from harness.traffic.collective import COLLECTIVES, ITEM, Member, Mesh, contribution
from harness.traffic.rdma_mesh import RdmaMesh
from harness.traffic.replica import EpochMesh, Inbox, read_exactly

PING_BYTES = 64
STREAM_CHUNK = 1 << 20


def barrier(mesh: EpochMesh, me: str, names: list[str]) -> None:
    peers = [p for p in names if p != me]
    mesh.exchange(dict.fromkeys(peers, b""), peers)


class Channel(Protocol):
    """One peer's end, over TCP or as RDMA writes: send some bytes, receive some, or take
    and discard them (a stream's sink)."""

    def send(self, payload: bytes | memoryview) -> None: ...

    def receive(self, size: int) -> bytes: ...

    def drain(self, size: int) -> None: ...


class TcpChannel:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray(STREAM_CHUNK)

    def send(self, payload: bytes | memoryview) -> None:
        self.sock.sendall(payload)

    def receive(self, size: int) -> bytes:
        return read_exactly(self.sock, size)

    def drain(self, size: int) -> None:
        """Into one reused buffer: the sink keeps nothing, so it copies nothing."""
        while size:
            got = self.sock.recv_into(self.buffer, min(size, STREAM_CHUNK))
            if not got:
                raise ConnectionError("the streaming peer closed the connection")
            size -= got


class WriteChannel:
    """Over a mesh of whole messages (RDMA writes): a receive takes messages until it has
    `size` bytes, so a stream's chunks and a ping's payload read alike."""

    def __init__(self, mesh: Mesh, peer: str) -> None:
        self.mesh, self.peer, self.pending = mesh, peer, b""

    def send(self, payload: bytes | memoryview) -> None:
        self.mesh.exchange({self.peer: bytes(payload)}, [])

    def receive(self, size: int) -> bytes:
        while len(self.pending) < size:
            self.pending += self.mesh.exchange({}, [self.peer])[self.peer]
        got, self.pending = self.pending[:size], self.pending[size:]
        return got

    def drain(self, size: int) -> None:
        self.receive(size)


def ping(channel: Channel, count: int) -> list[float]:
    """Round trips of PING_BYTES, in microseconds."""
    payload, rtts = bytes(PING_BYTES), []
    for _ in range(count):
        started = time.perf_counter_ns()
        channel.send(payload)
        channel.receive(PING_BYTES)
        rtts.append((time.perf_counter_ns() - started) / 1000)
    return rtts


def echo(channel: Channel, count: int) -> None:
    for _ in range(count):
        channel.send(channel.receive(PING_BYTES))


def stream(channel: Channel, size: int) -> float:
    """Seconds from the first byte sent to the receiver's word that it has all `size`."""
    chunk = memoryview(bytes(STREAM_CHUNK))
    started = time.perf_counter()
    left = size
    while left:
        part = min(left, STREAM_CHUNK)
        channel.send(chunk[:part])
        left -= part
    channel.receive(1)
    return time.perf_counter() - started


def sink(channel: Channel, size: int) -> None:
    channel.drain(size)
    channel.send(b"\1")


def point_to_point(mesh: EpochMesh, data: Mesh | None, me: str, names: list[str],
                   spec: dict[str, Any]) -> list[dict[str, Any]]:
    def channel(peer: str) -> Channel:
        return WriteChannel(data, peer) if data else TcpChannel(mesh.connection(peer))

    measured = []
    for a, b in spec["pairs"]:
        barrier(mesh, me, names)
        if me == a:
            to_b = channel(b)
            rtts = ping(to_b, spec["pings"])
            seconds = stream(to_b, spec["stream_bytes"])
            measured.append({"a": a, "b": b, "rtt_us": rtts, "stream_bytes": spec["stream_bytes"],
                             "stream_seconds": seconds})
        elif me == b:
            to_a = channel(a)
            echo(to_a, spec["pings"])
            sink(to_a, spec["stream_bytes"])
    return measured


def collective(mesh: EpochMesh, data: Mesh, me: str, members: list[Member],
               test: dict[str, Any]) -> dict[str, Any]:
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
        chosen.run(data, me, members, vector)
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
    data = rdma_mesh(spec, me) if "rdma" in spec else None
    report = None
    try:
        p2p = point_to_point(mesh, data, me, names, spec)
        tests = [collective(mesh, data or mesh, me, members, test) for test in spec["tests"]]
        barrier(mesh, me, names)  # nobody closes a connection another still reads
        if data:
            report = data.close()  # once all it sent is acknowledged
            barrier(mesh, me, names)
    finally:
        mesh.close()
        if data and report is None:
            data.abort()  # a failed rank's engine must not hold the node's port 4791
    return {"name": me, "p2p": p2p, "tests": tests,
            **({"rdma": json.loads(report.splitlines()[-1])} if report else {})}


def rdma_mesh(spec: dict[str, Any], me: str) -> RdmaMesh:
    rdma = spec["rdma"]
    nics = {name: Nic(**{k: tuple(v) if isinstance(v, list) else v for k, v in nic.items()})
            for name, nic in rdma["nics"].items()}
    settings = Settings(**{**rdma["settings"], "dcqcn": Dcqcn(**rdma["settings"]["dcqcn"])})
    return RdmaMesh(rdma["program"], nics[me], {n: nic for n, nic in nics.items() if n != me},
                    settings, spec["timeout"])


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
