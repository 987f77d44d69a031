"""Collectives over real sockets: the all-reduce algorithms training replicas run.

Each algorithm is written against `Mesh`, the point-to-point sends and receives of one
replica, so the same code runs in the replicas inside a lab and in a unit test over loopback.
Vectors are int64 (`array('q')`): sums are exact, so every replica can check its result.

- ring: reduce-scatter then all-gather around one ring, 2(n-1) steps each moving 1/n of the
  vector; optimal in bytes, but every step waits for the slowest hop of the ring.
- hierarchical: reduce inside each group (region) to its leader, a ring all-reduce among the
  leaders only (the one step that crosses BAG), and a broadcast back inside each group: fewer
  long-haul steps and bytes, at the price of more local traffic.
"""

from __future__ import annotations

import operator
import queue
import threading
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

ITEM = array("q").itemsize


class Mesh(Protocol):
    def exchange(self, sends: dict[str, bytes], receives: Sequence[str]) -> dict[str, bytes]:
        """Send each payload to its peer while receiving one payload from each of `receives`."""


@dataclass(frozen=True)
class Member:
    name: str
    group: str  # the region: what the hierarchical algorithm keeps local


def chunks(length: int, parts: int) -> list[slice]:
    """`length` items in `parts` nearly equal contiguous slices (the first ones one longer)."""
    size, extra = divmod(length, parts)
    bounds = [0]
    for i in range(parts):
        bounds.append(bounds[-1] + size + (i < extra))
    return [slice(bounds[i], bounds[i + 1]) for i in range(parts)]


def _add(into: array, at: slice, payload: bytes) -> None:
    other = array("q")
    other.frombytes(payload)
    into[at] = array("q", map(operator.add, into[at], other))


def _put(into: array, at: slice, payload: bytes) -> None:
    other = array("q")
    other.frombytes(payload)
    into[at] = other


def ring(mesh: Mesh, me: str, ring_order: Sequence[str], vector: array) -> None:
    """In-place ring all-reduce of `vector` among `ring_order` (which contains `me`)."""
    n = len(ring_order)
    if n < 2:
        return
    i = ring_order.index(me)
    nxt, prev = ring_order[(i + 1) % n], ring_order[(i - 1) % n]
    parts = chunks(len(vector), n)
    for step in range(n - 1):  # reduce-scatter: after it, `me` holds the sum of chunk i+1
        out, into = parts[(i - step) % n], parts[(i - step - 1) % n]
        _add(vector, into, mesh.exchange({nxt: vector[out].tobytes()}, [prev])[prev])
    for step in range(n - 1):  # all-gather: pass the summed chunks on around the ring
        out, into = parts[(i + 1 - step) % n], parts[(i - step) % n]
        _put(vector, into, mesh.exchange({nxt: vector[out].tobytes()}, [prev])[prev])


def hierarchical(mesh: Mesh, me: str, members: Sequence[Member], vector: array) -> None:
    """Reduce in each group to its leader, ring among the leaders, broadcast in each group."""
    group = next(m.group for m in members if m.name == me)
    local = [m.name for m in members if m.group == group]
    leaders = list(dict.fromkeys(next(m.name for m in members if m.group == g)
                                 for g in (m.group for m in members)))
    leader, others = local[0], local[1:]
    if me == leader:
        for payload in mesh.exchange({}, others).values():
            _add(vector, slice(0, len(vector)), payload)
        ring(mesh, me, leaders, vector)
        mesh.exchange({peer: vector.tobytes() for peer in others}, [])
    else:
        mesh.exchange({leader: vector.tobytes()}, [])
        _put(vector, slice(0, len(vector)), mesh.exchange({}, [leader])[leader])


def flat_ring(mesh: Mesh, me: str, members: Sequence[Member], vector: array) -> None:
    """The ring in member order (members of a group next to each other, as a scheduler
    placing ranks by rack would): two hops of it cross between groups."""
    ring(mesh, me, [m.name for m in members], vector)


Algorithm = Callable[[Mesh, str, Sequence[Member], array], None]
ALGORITHMS: dict[str, Algorithm] = {"ring": flat_ring, "hierarchical": hierarchical}


class LocalMesh:
    """A `Mesh` of threads in one process, one queue per ordered pair, keeping the algorithm's
    own account: payload bytes per pair, and per message how many group crossings lie on the
    longest chain of messages that led to it (a Lamport clock counting only crossings)."""

    def __init__(self, members: Sequence[Member]) -> None:
        self.group = {m.name: m.group for m in members}
        self.wires: dict[tuple[str, str], queue.Queue[tuple[bytes, int]]] = {
            (a, b): queue.Queue() for a in self.group for b in self.group if a != b}
        self.sent = dict.fromkeys(self.wires, 0)
        self.depth = dict.fromkeys(self.group, 0)
        self.lock = threading.Lock()

    def of(self, me: str) -> Mesh:
        local = self

        class One:
            def exchange(self, sends: dict[str, bytes], receives: Sequence[str]
                         ) -> dict[str, bytes]:
                for peer, payload in sends.items():
                    crossing = local.group[me] != local.group[peer]
                    with local.lock:
                        local.sent[(me, peer)] += len(payload)
                        depth = local.depth[me] + crossing
                    local.wires[(me, peer)].put((payload, depth))
                got = {}
                for peer in receives:
                    got[peer], depth = local.wires[(peer, me)].get(timeout=30)
                    with local.lock:
                        local.depth[me] = max(local.depth[me], depth)
                return got
        return One()

    def crossing_bytes(self) -> int:
        return sum(n for (a, b), n in self.sent.items() if self.group[a] != self.group[b])

    def critical_crossings(self) -> int:
        """Crossings one after another that the slowest member waited for: its time is at
        least this many one-way delays between groups."""
        return max(self.depth.values())


def run_locally(algorithm: str, members: Sequence[Member], vectors: dict[str, array]
                ) -> LocalMesh:
    """Run `algorithm` among `members` in threads, reducing `vectors` in place."""
    mesh = LocalMesh(members)
    threads = [threading.Thread(target=ALGORITHMS[algorithm], args=(
        mesh.of(m.name), m.name, members, vectors[m.name])) for m in members]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return mesh


def dry_run(algorithm: str, members: Sequence[Member], size: int) -> LocalMesh:
    """The account of one all-reduce of `size` bytes, without a network."""
    length = max(size // ITEM, 1)
    return run_locally(algorithm, members, {m.name: array("q", bytes(length * ITEM))
                                            for m in members})


def contribution(seed: int, iteration: int, length: int) -> array:
    """What replica `seed` contributes at `iteration`: distinct per replica and per step."""
    base = (seed + 1) * (iteration + 1)
    return array("q", (base + j % 7 for j in range(length)))


def expected(seeds: Sequence[int], iteration: int, length: int) -> array:
    """The all-reduce of every `seeds` replica's contribution, computed without the network."""
    base = sum((s + 1) * (iteration + 1) for s in seeds)
    return array("q", (base + len(seeds) * (j % 7) for j in range(length)))
