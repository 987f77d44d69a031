"""One training replica: runs each all-reduce the rendezvous orders, over TCP to its peers.

Usage: python -m harness.traffic.replica NAME GROUP SEED ADDR PORT RENDEZVOUS_ADDR RV_PORT TIMEOUT

The rendezvous (rendezvous.py) says, per iteration, who the members are and under which epoch;
a new epoch means the membership changed. Data connections belong to an epoch: one TCP
connection per pair of members, opened by the lower name, so a membership change never mixes
payloads of two memberships. When an order of a newer epoch arrives while an all-reduce is
running, its connections are shut down, which ends the waits on a dead peer at once.
"""

from __future__ import annotations

import contextlib
import json
import queue
import socket
import struct
import sys
import threading
import time
from collections.abc import Sequence

from harness.core.wait import wait_until
from harness.traffic.collective import ALGORITHMS, Member, contribution, expected

FRAME = struct.Struct("!IQ")  # epoch, payload length
HELLO = struct.Struct("!I64s")  # epoch, the connecting member's name


class Inbox:
    """Connections peers opened to this replica, by (epoch, peer)."""

    def __init__(self, listener: socket.socket) -> None:
        self.listener = listener
        self.ready: dict[tuple[int, str], socket.socket] = {}
        self.cond = threading.Condition()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            sock, _ = self.listener.accept()
            sock.settimeout(5)
            try:
                epoch, name = HELLO.unpack(read_exactly(sock, HELLO.size))
            except OSError:
                sock.close()
                continue
            with self.cond:
                self.ready[(epoch, name.rstrip(b"\0").decode())] = sock
                self.cond.notify_all()

    def take(self, epoch: int, peer: str, timeout: float) -> socket.socket:
        with self.cond:
            if not self.cond.wait_for(lambda: (epoch, peer) in self.ready, timeout):
                raise TimeoutError(f"{peer} did not connect within {timeout:g}s")
            for key in [k for k in self.ready if k[0] < epoch]:  # a past membership's
                self.ready.pop(key).close()
            return self.ready.pop((epoch, peer))


def read_exactly(sock: socket.socket, size: int) -> bytes:
    buf = bytearray()
    while len(buf) < size:
        got = sock.recv(min(size - len(buf), 1 << 20))
        if not got:
            raise ConnectionError("peer closed the connection")
        buf += got
    return bytes(buf)


class EpochMesh:
    """The `Mesh` of one membership: connections made on first use, all closed together."""

    def __init__(self, me: str, epoch: int, addresses: dict[str, tuple[str, int]],
                 inbox: Inbox, timeout: float, *, patient: bool = False) -> None:
        """`patient`: a peer not listening yet is tried again until `timeout` (ranks that
        start together); a replica's peer that refuses is dead and aborts the step."""
        self.me, self.epoch, self.addresses, self.inbox = me, epoch, addresses, inbox
        self.timeout, self.patient = timeout, patient
        self.socks: dict[str, socket.socket] = {}
        self.opening: dict[str, threading.Lock] = {}
        self.lock = threading.Lock()
        self.aborted = False

    def connection(self, peer: str) -> socket.socket:
        """The connection to `peer`; a send and a receive asking at once share one."""
        with self.lock:
            if self.aborted:
                raise ConnectionAbortedError("the membership changed")
            opening = self.opening.setdefault(peer, threading.Lock())
        with opening:
            if peer not in self.socks:
                self._open(peer)
            return self.socks[peer]

    def _open(self, peer: str) -> None:
        if self.me < peer:
            sock = self._connect(peer)
            sock.sendall(HELLO.pack(self.epoch, self.me.encode()))
        else:
            sock = self.inbox.take(self.epoch, peer, self.timeout)
        sock.settimeout(self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.lock:
            self.socks[peer] = sock
            if self.aborted:
                sock.shutdown(socket.SHUT_RDWR)

    def _connect(self, peer: str) -> socket.socket:
        def connect() -> socket.socket:
            return socket.create_connection(self.addresses[peer], timeout=self.timeout)

        if not self.patient:
            return connect()
        return wait_until(connect, self.timeout, lambda _: ConnectionRefusedError(
            f"{peer} refused connections for {self.timeout:g} s"), every=0.05,
            retry=ConnectionRefusedError)

    def exchange(self, sends: dict[str, bytes], receives: Sequence[str]) -> dict[str, bytes]:
        errors: list[BaseException] = []

        def send(peer: str, payload: bytes) -> None:
            try:
                self.connection(peer).sendall(FRAME.pack(self.epoch, len(payload)) + payload)
            except OSError as exc:
                errors.append(exc)
                self.abort()  # a peer waiting on this one hears of it now, not at its timeout

        threads = [threading.Thread(target=send, args=item) for item in sends.items()]
        for t in threads:
            t.start()
        got = {}
        try:
            for peer in receives:
                sock = self.connection(peer)
                epoch, length = FRAME.unpack(read_exactly(sock, FRAME.size))
                if epoch != self.epoch:
                    raise ConnectionError(f"{peer} sent epoch {epoch}, not {self.epoch}")
                got[peer] = read_exactly(sock, length)
        except OSError:
            self.abort()
            raise
        finally:
            for t in threads:
                t.join()
        if errors:
            raise errors[0]
        return got

    def abort(self) -> None:
        with self.lock:
            self.aborted = True
            for sock in self.socks.values():
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.abort()
        for sock in self.socks.values():
            sock.close()


def main(argv: list[str]) -> int:
    name, group, seed, addr, port, rv_addr, rv_port, timeout_s = argv
    timeout = float(timeout_s)
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((addr, int(port)))
    listener.listen(64)
    inbox = Inbox(listener)
    control = socket.create_connection((rv_addr, int(rv_port)), timeout=timeout)
    control.settimeout(None)
    control.sendall(json.dumps({"hello": name, "group": group, "seed": int(seed),
                                "addr": addr, "port": int(port)}).encode() + b"\n")
    orders: queue.Queue[dict | None] = queue.Queue()
    current: list[EpochMesh] = []

    def listen() -> None:
        for line in control.makefile("rb"):
            order = json.loads(line)
            if current and order.get("epoch", -1) > current[0].epoch:
                current[0].abort()
            orders.put(order)
        orders.put(None)  # the rendezvous is gone: so is the training

    threading.Thread(target=listen, daemon=True).start()
    while (order := orders.get()) is not None and "iteration" in order:
        members = [Member(m["name"], m["group"]) for m in order["members"]]
        if not current or current[0].epoch != order["epoch"]:
            if current:
                current.pop().close()
            current.append(EpochMesh(name, order["epoch"], {
                m["name"]: (m["addr"], m["port"]) for m in order["members"]}, inbox, timeout))
        k, length = order["iteration"], order["length"]
        vector = contribution(int(seed), k, length)
        started = time.monotonic()
        try:
            ALGORITHMS[order["algorithm"]](current[0], name, members, vector)
        except OSError as exc:
            report = {"abort": k, "why": f"{type(exc).__name__}: {exc}"}
        else:
            report = {"done": k, "seconds": time.monotonic() - started,
                      "ok": vector == expected([m["seed"] for m in order["members"]], k, length)}
        control.sendall(json.dumps({**report, "epoch": order["epoch"]}).encode() + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
