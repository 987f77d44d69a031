"""The embedded default runtime: each node is a named network namespace, nothing more.

No container engine, no images: processes of a node are started with `ip netns exec`, so they
see the node's interfaces and the host's filesystem and Python, exactly like Mininet hosts.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.core.build import built, compiled
from harness.core.errors import LabError
from harness.core.paths import (
    FRR_SBIN,
    NETNS_PREFIX,
    frr_run_dir,
    is_lab_name,
    lab_netns_prefix,
    netns_name,
)
from harness.linux import ksm
from harness.linux.journal import Journal, process_start_time
from harness.linux.nsenter import NETNS_RUN_DIR, create_netns, list_netns, remove_netns
from harness.linux.processes import kill_and_reap, namespace_ids, pids_in_namespaces
from harness.runtime.base import ImageOf
from harness.topology.binds import Bind
from harness.topology.plan import LabPlan, NodePlan


class NetnsRuntime:
    name = "netns"
    cannot_share_memory = None

    def __init__(self, lab: str, journal: Journal) -> None:
        self.lab = lab
        self.journal = journal
        self.nodes: dict[str, NodePlan] = {}
        self.mounts: dict[str, list[Bind]] = {}
        self.mergeable: list[str] = []  # fl-mergeable before every command, when shared

    def netns_path(self, node: str) -> str:
        return f"{NETNS_RUN_DIR}/{netns_name(self.lab, node)}"

    def host_path(self, node: str, path: Path) -> Path:
        return path  # nodes share the host's files

    def prepare(self, plan: LabPlan, image_of: ImageOf) -> LabPlan:
        """Which binds each node's processes get (those whose target exists on the host's
        filesystem, which netns nodes share), and what each image became."""
        notes = []
        self.mergeable = [self.program(ksm.TOOL)] if plan.share_memory else []
        for node in plan.nodes:
            self.nodes[node.name] = node
            self.mounts[node.name] = [b for b in node.binds if Path(b.target).exists()]
            notes += [f"{node.name}: bind {b} not mounted: netns nodes share the host's files "
                      f"and it has no {b.target} (the docker runtime mounts it)"
                      for b in node.binds if b not in self.mounts[node.name]]
            if node.image is not None:
                notes.append(f"{node.name}: image {node.image} -> " + (
                    image_of(node).runs or "a namespace running this host's programs"))
        return plan.model_copy(update={"notes": list(dict.fromkeys([*plan.notes, *notes]))})

    def check(self, plan: LabPlan, *, start: bool) -> None:
        if start and any(n.runs_frr for n in plan.nodes) and \
                not (FRR_SBIN / "zebra").exists():
            raise LabError(f"FRR is not installed ({FRR_SBIN}/zebra is missing): "
                           "`apt-get install frr`, or run `make lab` which installs it")

    def create_nodes(self, nodes: Sequence[NodePlan]) -> None:
        for node in nodes:
            name = netns_name(self.lab, node.name)
            self.journal.netns(name)  # first: a kill between the two lines leaves a known name
            create_netns(name)

    def _wrap(self, node: str, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", netns_name(self.lab, node), *self.mergeable, *argv]

    def confine(self, node: str, argv: Sequence[str]) -> list[str]:
        """A containerlab node's own commands see the host's files read-only, its binds and
        its own /etc/frr and FRR sockets (harness/runtime/sandbox.py); a fabric node's run
        as they are. Both with the node's `env`."""
        plan = self.nodes[node]
        command = ["env", *(f"{k}={v}" for k, v in plan.env.items()), *argv]
        if not plan.user_configured:
            return command
        return [*self.python("harness.runtime.sandbox"),
                *(f"--bind={b}" for b in self.mounts[node]),
                *([f"--frr-run={frr_run_dir(self.lab, node)}"] if plan.runs_own_frr else []),
                "--", *command]

    def run(self, node: str, argv: Sequence[str], *, timeout: float | None = 60,
            input: str | None = None, check: bool = False) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self._wrap(node, argv), capture_output=True, text=True,
                              timeout=timeout, input=input, check=check)

    def popen(self, node: str, argv: Sequence[str], **kwargs: object) -> subprocess.Popen:
        return subprocess.Popen(self._wrap(node, argv), **kwargs)  # type: ignore[call-overload]

    def spawn(self, node: str, argv: Sequence[str], log: Path, what: str) -> int:
        with open(log, "ab") as out:  # `ip netns exec` execs: the child's pid is the helper's
            proc = self.popen(node, argv, stdout=out, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, start_new_session=True)
        self.journal.process(proc.pid, what)
        return proc.pid

    def host_pid(self, node: str, pid: int) -> int | None:
        return pid if process_start_time(pid) is not None else None

    def node_processes(self, node: str) -> list[int]:
        return pids_in_namespaces(namespace_ids([self.netns_path(node)]))

    def python(self, module: str, *args: str) -> list[str]:
        compiled()
        return [sys.executable, "-m", module, *args]

    def program(self, name: str) -> str:
        return str(built(name))

    def interactive(self, node: str, argv: Sequence[str]) -> int:
        return subprocess.call(self._wrap(node, argv))

    def existing_nodes(self) -> list[str]:
        prefix = lab_netns_prefix(self.lab)
        return [n.removeprefix(prefix) for n in list_netns() if n.startswith(prefix)]

    def destroy(self) -> list[int]:
        prefix = lab_netns_prefix(self.lab)
        names = {n for n in list_netns() if n.startswith(prefix)}
        names |= {n for n in self.journal.namespaces() if n.startswith(prefix)}
        paths = [f"{NETNS_RUN_DIR}/{n}" for n in names]
        survivors = kill_and_reap(pids_in_namespaces(namespace_ids(paths)))
        for name in names:
            remove_netns(name)
        return survivors

    @staticmethod
    def all_lab_names() -> set[str]:
        return {lab for n in list_netns() if n.startswith(NETNS_PREFIX + ".")
                and n.count(".") >= 2 and is_lab_name(lab := n.split(".")[1])}
