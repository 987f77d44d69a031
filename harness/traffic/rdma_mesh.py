"""A rank's point-to-point sends and receives as RDMA writes: the collectives' `Mesh` over
fl-rdma in data mode, so `labctl validate --transport` times them on the C transport.

The rank starts one engine with every other rank as a peer (one QP each) and two pipes:
each payload it sends is written to the engine as (peer index, length, bytes) and goes out
as one RDMA write; each write that arrives whole comes back as (sender's host id, length,
bytes), in the order its sender posted them, which is all `exchange` needs.
"""

from __future__ import annotations

import os
import queue
import struct
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import replace

from harness.core.errors import LabError
from harness.nodes.rdma.engine import Nic, Settings, argv

HEAD = struct.Struct("!II")


class RdmaMesh:
    """`me` and `peers` by rank name; `program` is fl-rdma as this node runs it."""

    def __init__(self, program: str, me: Nic, peers: dict[str, Nic], settings: Settings,
                 timeout: float) -> None:
        self.index = {name: i for i, name in enumerate(peers)}
        self.names = {nic.host_id: name for name, nic in peers.items()}
        self.timeout = timeout
        self.inbox: dict[str, queue.Queue[bytes]] = {name: queue.Queue() for name in peers}
        to_engine, self._post = os.pipe()
        self._deliveries, from_engine = os.pipe()
        settings = replace(settings, qps=1,  # data mode: the parent says what to send
                           deadline_ms=int(timeout * 1000) * 100)
        self.process = subprocess.Popen(
            [*argv(program, me, list(peers.values()), settings, 0), "data=1",
             f"data_in={to_engine}", f"data_out={from_engine}"],
            pass_fds=(to_engine, from_engine), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        os.close(to_engine)
        os.close(from_engine)
        assert self.process.stdout is not None
        if b"ready" not in self.process.stdout.readline():
            raise LabError(f"fl-rdma did not start: {self.process.stderr.read().decode()[-300:]}"
                           if self.process.stderr else "fl-rdma did not start")
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        with os.fdopen(self._deliveries, "rb") as stream:
            while head := stream.read(HEAD.size):
                host, length = HEAD.unpack(head)
                self.inbox[self.names[host]].put(stream.read(length))

    def exchange(self, sends: dict[str, bytes], receives: Sequence[str]) -> dict[str, bytes]:
        for peer, payload in sends.items():
            os.write(self._post, HEAD.pack(self.index[peer], len(payload)))
            view = memoryview(payload)
            while view:
                view = view[os.write(self._post, view):]
        try:
            return {peer: self.inbox[peer].get(timeout=self.timeout) for peer in receives}
        except queue.Empty:
            raise LabError(f"no RDMA write came from {', '.join(receives)} within "
                           f"{self.timeout:g}s") from None

    def abort(self) -> None:
        self.process.kill()
        self.process.wait()

    def close(self) -> str:
        """End the engine once everything sent is acknowledged; its JSON report."""
        os.close(self._post)
        out, err = self.process.communicate(timeout=self.timeout)
        self.reader.join(self.timeout)
        if self.process.returncode:
            raise LabError(f"fl-rdma failed: {err.decode()[-300:]}")
        return out.decode()
