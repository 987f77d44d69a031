"""The Runtime protocol: what every way of running nodes (netns, docker, mininet) provides.

A runtime only makes nodes exist and run commands in them. Links, addresses, FRR and
impairments are built on top through `netns_path`, so they work unchanged on every runtime.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from typing import Protocol


class Runtime(Protocol):
    name: str
    lab: str

    def create_node(self, node: str) -> None:
        """Make the node exist with an empty network namespace (just `lo`)."""

    def netns_path(self, node: str) -> str:
        """A path that setns(2) accepts for the node's network namespace."""

    def run(self, node: str, argv: Sequence[str], *, timeout: float | None = 60,
            input: str | None = None, check: bool = False) -> subprocess.CompletedProcess[str]:
        """Run a command inside the node and capture its output as text."""

    def popen(self, node: str, argv: Sequence[str], **kwargs: object) -> subprocess.Popen:
        """Start a long-running command inside the node."""

    def interactive(self, node: str, argv: Sequence[str]) -> int:
        """Run a command inside the node attached to the user's terminal."""

    def existing_nodes(self) -> list[str]:
        """Nodes of this lab that exist right now (also ones no journal knows)."""

    def destroy(self) -> list[int]:
        """Remove every node of the lab and every process running in them; return the pids
        that survived SIGKILL."""
