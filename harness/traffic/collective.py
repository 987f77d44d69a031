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


def _ring_neighbours(me: str, ring_order: Sequence[str]) -> tuple[int, str, str]:
    i = ring_order.index(me)
    return i, ring_order[(i + 1) % len(ring_order)], ring_order[(i - 1) % len(ring_order)]


def reduce_scatter(mesh: Mesh, me: str, ring_order: Sequence[str], vector: array) -> None:
    """Around the ring, n-1 steps each adding 1/n of the vector: after it, rank i holds the
    sum of chunk i (the other chunks hold partial sums)."""
    n = len(ring_order)
    i, nxt, prev = _ring_neighbours(me, ring_order)
    parts = chunks(len(vector), n)
    for step in range(n - 1):
        out, into = parts[(i - step - 1) % n], parts[(i - step - 2) % n]
        _add(vector, into, mesh.exchange({nxt: vector[out].tobytes()}, [prev])[prev])


def all_gather(mesh: Mesh, me: str, ring_order: Sequence[str], vector: array) -> None:
    """Around the ring, n-1 steps: rank i starts with chunk i and ends with every rank's."""
    n = len(ring_order)
    i, nxt, prev = _ring_neighbours(me, ring_order)
    parts = chunks(len(vector), n)
    for step in range(n - 1):
        out, into = parts[(i - step) % n], parts[(i - step - 1) % n]
        _put(vector, into, mesh.exchange({nxt: vector[out].tobytes()}, [prev])[prev])


def ring(mesh: Mesh, me: str, ring_order: Sequence[str], vector: array) -> None:
    """In-place ring all-reduce of `vector` among `ring_order` (which contains `me`)."""
    if len(ring_order) < 2:
        return
    reduce_scatter(mesh, me, ring_order, vector)
    all_gather(mesh, me, ring_order, vector)


def tree(mesh: Mesh, me: str, members: Sequence[Member], vector: array) -> None:
    """All-reduce up a binary tree over the members' order and back down: 2 log2(n) steps of
    the whole vector (NCCL pipelines two such trees; this one is not pipelined)."""
    order = [m.name for m in members]
    i, whole = order.index(me), slice(0, len(vector))
    children = [order[c] for c in (2 * i + 1, 2 * i + 2) if c < len(order)]
    for payload in mesh.exchange({}, children).values():
        _add(vector, whole, payload)
    if i:
        parent = order[(i - 1) // 2]
        mesh.exchange({parent: vector.tobytes()}, [])
        _put(vector, whole, mesh.exchange({}, [parent])[parent])
    mesh.exchange({child: vector.tobytes() for child in children}, [])


def all_to_all(mesh: Mesh, me: str, members: Sequence[Member], vector: array) -> None:
    """Chunk j of every rank to rank j, all at once: rank i ends with rank j's chunk i in
    its slot j (the vector's length a multiple of n, as nccl-tests requires)."""
    order = [m.name for m in members]
    i, parts = order.index(me), chunks(len(vector), len(order))
    peers = [p for p in order if p != me]
    got = mesh.exchange({order[j]: vector[parts[j]].tobytes() for j in range(len(order))
                         if j != i}, peers)
    mine = vector[parts[i]]
    for j, peer in enumerate(order):
        if j == i:
            vector[parts[j]] = mine
        else:
            _put(vector, parts[j], got[peer])


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
ALGORITHMS: dict[str, Algorithm] = {"ring": flat_ring, "hierarchical": hierarchical,
                                    "tree": tree}  # the all-reduces


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


def run_locally(algorithm: str | Algorithm, members: Sequence[Member],
                vectors: dict[str, array]) -> LocalMesh:
    """Run `algorithm` (an all-reduce's name, or any collective) among `members` in threads,
    on `vectors` in place."""
    mesh = LocalMesh(members)
    run = ALGORITHMS[algorithm] if isinstance(algorithm, str) else algorithm
    threads = [threading.Thread(target=run, args=(
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


Expect = Callable[[Sequence[array], int], tuple[slice, array]]


@dataclass(frozen=True)
class Collective:
    """One collective as nccl-tests measures it: run on a vector of `size` bytes per rank,
    algbw = size / time, busbw = algbw x bus_factor(n), the share of the data each rank's
    link must carry, so busbw compares with the link's own bandwidth whatever n is."""

    name: str
    run: Algorithm
    bus_factor: Callable[[int], float]
    expect: Expect  # every rank's input, my index -> the slice of my vector that is defined

    def check(self, inputs: Sequence[array], index: int, vector: array) -> bool:
        where, wanted = self.expect(inputs, index)
        return vector[where] == wanted


def _sum(inputs: Sequence[array]) -> array:
    return array("q", map(sum, zip(*inputs, strict=True)))


def _whole_sum(inputs: Sequence[array], index: int) -> tuple[slice, array]:
    return slice(0, len(inputs[0])), _sum(inputs)


def _my_chunk_sum(inputs: Sequence[array], index: int) -> tuple[slice, array]:
    mine = chunks(len(inputs[0]), len(inputs))[index]
    return mine, _sum([v[mine] for v in inputs])


def _gathered(inputs: Sequence[array], index: int) -> tuple[slice, array]:
    parts = chunks(len(inputs[0]), len(inputs))
    return slice(0, len(inputs[0])), array("q", (x for j, part in enumerate(parts)
                                                 for x in inputs[j][part]))


def _exchanged(inputs: Sequence[array], index: int) -> tuple[slice, array]:
    mine = chunks(len(inputs[0]), len(inputs))[index]
    return slice(0, len(inputs[0])), array("q", (x for v in inputs for x in v[mine]))


def _all_reduce_factor(n: int) -> float:
    return 2 * (n - 1) / n


def _one_pass_factor(n: int) -> float:
    return (n - 1) / n


def _ring_of(step: Callable[[Mesh, str, Sequence[str], array], None]) -> Algorithm:
    def in_member_order(mesh: Mesh, me: str, members: Sequence[Member], vector: array) -> None:
        step(mesh, me, [m.name for m in members], vector)
    return in_member_order


COLLECTIVES: dict[str, Collective] = {c.name: c for c in (
    Collective("all_reduce:ring", flat_ring, _all_reduce_factor, _whole_sum),
    Collective("all_reduce:tree", tree, _all_reduce_factor, _whole_sum),
    Collective("all_reduce:hierarchical", hierarchical, _all_reduce_factor, _whole_sum),
    Collective("all_gather:ring", _ring_of(all_gather), _one_pass_factor, _gathered),
    Collective("reduce_scatter:ring", _ring_of(reduce_scatter), _one_pass_factor,
               _my_chunk_sum),
    Collective("all_to_all", all_to_all, _one_pass_factor, _exchanged),
)}
