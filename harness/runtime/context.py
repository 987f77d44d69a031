"""What every layer after the runtime works on: the resolved plan, the runtime and the journal.

Node kinds, convergence, impairments, spraying, faults and traffic take a `LabContext`
rather than the whole `Lab`, so none of them depends on how a lab is deployed or destroyed.
It sits below the node kinds: what a kind adds to a node (its FRR, its kind) comes from the
node layer's own functions (`nodes.frr.frr_of`, `nodes.kind.kind_of`), never from here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from harness.core.errors import LabError
from harness.core.wait import NotReady, wait_until
from harness.linux.cpu import cpu_s
from harness.linux.journal import Journal
from harness.runtime.base import Runtime
from harness.runtime.node import Node
from harness.topology.plan import LabPlan

Answer = TypeVar("Answer")
READY_POLL_S = 0.05
# A helper silent at its timeout but busy (a tenth of a CPU or more through it) is starting on
# a slow or emulated CPU, not stuck: it gets another timeout, up to this many.
BUSY_SHARE, BUSY_EXTENSIONS = 0.1, 9


@dataclass
class LabContext:
    plan: LabPlan
    dir: Path
    runtime: Runtime
    journal: Journal
    _nodes: dict[str, Node] = field(default_factory=dict, repr=False)

    def node(self, name: str) -> Node:
        if name not in self._nodes:
            try:
                self._nodes[name] = Node(self.plan.node(name), self.runtime)
            except KeyError:
                raise LabError(f"lab {self.plan.name} has no node {name!r}; nodes: "
                               f"{', '.join(n.name for n in self.plan.nodes)}") from None
        return self._nodes[name]

    @property
    def node_names(self) -> list[str]:
        return [n.name for n in self.plan.nodes]

    def node_dir(self, name: str) -> Path:
        return self.dir / "nodes" / name

    def start_helper(self, node: str, argv: Sequence[str], what: str, out: Path, log: Path,
                     ready: Callable[[], Answer], timeout: float) -> tuple[int, Answer]:
        """Start a long-lived helper in the node (recorded, so destroy ends it) and wait until
        `ready` answers rather than raise LabError; return its pid and that answer. A helper
        that dies first, or is still silent at `timeout` while idle (or after the busy
        extensions), is an error with its output's end."""
        pid = self.runtime.spawn(node, argv, out, f"{node}/{what}")
        started, used, extensions = time.monotonic(), 0.0, 0
        while True:
            try:
                return pid, wait_until(ready, timeout, every=READY_POLL_S, retry=LabError,
                                       until=lambda _: True,
                                       alive=lambda: self.runtime.host_pid(node, pid) is not None)
            except NotReady:
                host = self.runtime.host_pid(node, pid)
                busy = 0.0 if host is None else cpu_s(host) - used
                if busy < BUSY_SHARE * timeout or extensions == BUSY_EXTENSIONS:
                    why = "exited" if host is None else \
                        f"silent after {time.monotonic() - started:.1f} s ({used + busy:.1f} " \
                        "CPU s used)"
                    raise LabError(f"{node}: the {what} did not start ({why}); see {log}\n"
                                   f"{out.read_text()[-2000:]}") from None
                used, extensions = used + busy, extensions + 1
