"""The Runtime protocol: what every way of running nodes (netns, docker) provides.

A runtime makes nodes exist, runs commands and long-lived helpers in them, and removes them.
Links, addresses, FRR and impairments are built on top through `netns_path`, so they work
unchanged on every runtime. Every runtime keeps a node's files in the lab directory under the
same path inside and outside the node, so a node's FRR sockets, logs and helper state read the
same from both sides.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from harness.topology.plan import LabPlan, NodePlan


@dataclass(frozen=True)
class NodeImage:
    """What a node is as an image, as its kind says (harness/nodes/kind.py): the image built
    here that it runs in a container (`fabric-lab/switch` or `fabric-lab/host`), and what a
    node given a user's image runs instead (None: the user's own exec and cmd)."""

    built: str
    runs: str | None


ImageOf = Callable[[NodePlan], NodeImage]


class Runtime(Protocol):
    name: str
    lab: str
    cannot_share_memory: str | None  # why its nodes cannot run mergeable (ksm.py), or None

    def prepare(self, plan: LabPlan, image_of: ImageOf) -> LabPlan:
        """The plan as this runtime deploys it (e.g. with each node's image filled in, from
        what `image_of` says of the node)."""

    def check(self, plan: LabPlan, *, start: bool) -> None:
        """Raise a LabError saying what to install or start when the lab cannot deploy here;
        `start` is whether node kinds will start (FRR, agents) or the lab is only wired."""

    def create_nodes(self, nodes: Sequence[NodePlan]) -> None:
        """Make the nodes exist, each with an empty network namespace (just `lo`)."""

    def netns_path(self, node: str) -> str:
        """A path that setns(2) accepts for the node's network namespace."""

    def host_path(self, node: str, path: Path) -> Path:
        """Where the host reaches a path of the node's own filesystem (a daemon's socket
        outside the lab directory)."""

    def run(self, node: str, argv: Sequence[str], *, timeout: float | None = 60,
            input: str | None = None, check: bool = False) -> subprocess.CompletedProcess[str]:
        """Run a command inside the node and capture its output as text."""

    def popen(self, node: str, argv: Sequence[str], **kwargs: object) -> subprocess.Popen:
        """Start a command inside the node that the caller waits for (a flow, a capture)."""

    def spawn(self, node: str, argv: Sequence[str], log: Path, what: str) -> int:
        """Start a long-lived helper (agent, sprayer, engine) detached, its output appended to
        `log`, recorded so destroy ends it; return its pid as the node sees it."""

    def host_pid(self, node: str, pid: int) -> int | None:
        """The host's pid of the node's process `pid`, or None when it is gone."""

    def node_processes(self, node: str) -> list[int]:
        """Host pids of every process of the node except what keeps the node itself alive:
        what a crash kills."""

    def python(self, module: str, *args: str) -> list[str]:
        """argv that runs one of the project's modules inside the node."""

    def program(self, name: str) -> str:
        """Path, inside the node, of one of the project's built programs (build/NAME)."""

    def interactive(self, node: str, argv: Sequence[str]) -> int:
        """Run a command inside the node attached to the user's terminal."""

    def confine(self, node: str, argv: Sequence[str]) -> list[str]:
        """argv as the user's own command on the node runs it (exec, cmd, `labctl exec`):
        with the node's env, and where nodes share the host's files, unable to change them."""

    def existing_nodes(self) -> list[str]:
        """Nodes of this lab that exist right now (also ones no journal knows)."""

    @staticmethod
    def all_lab_names() -> set[str]:
        """Labs that own at least one node on this runtime, journal or not."""

    def destroy(self) -> list[int]:
        """Remove every node of the lab and every process running in them; return the pids
        that survived SIGKILL."""
