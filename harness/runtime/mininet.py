"""The mininet runtime: Mininet makes the nodes, fabric-lab does the rest.

Each node is a Mininet host (Debian's Mininet under the system python3: no OVS, no
controller), and `labctl mininet FILE` opens Mininet's CLI over the running lab. Right after
Mininet creates a host, its namespace is attached under the netns runtime's name
(`ip netns attach fl.<lab>.<node> PID`), so links, FRR, helpers and destroy work exactly as on
the netns runtime: destroy ends every process in those namespaces (Mininet's shells
included), the Mininet process (journaled), and removes the names. Mininet's global cleanup
(which deletes /tmp/*.log and kills host processes by name) is never run.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path

from harness.core.errors import LabError
from harness.core.paths import lab_dir, netns_name
from harness.core.wait import wait_until
from harness.linux.journal import Journal
from harness.linux.processes import kill_and_reap
from harness.runtime.netns import NetnsRuntime
from harness.topology.plan import LabPlan, NodePlan

SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's mininet package installs for this one only
SERVER = Path(__file__).with_name("mininet_net.py")
START_TIMEOUT_S = 120.0


class MininetRuntime(NetnsRuntime):
    name = "mininet"

    def __init__(self, lab: str, journal: Journal) -> None:
        super().__init__(lab, journal)
        self.dir = lab_dir(lab)
        self.cli = False  # `labctl mininet` sets it: Mininet keeps the terminal for its CLI
        self.server: subprocess.Popen | None = None

    @property
    def _pids_file(self) -> Path:
        return self.dir / "mininet-pids.json"

    @property
    def _ready_file(self) -> Path:
        return self.dir / "mininet-ready.json"

    def check(self, plan: LabPlan, *, start: bool) -> None:
        super().check(plan, start=start)
        out = subprocess.run([SYSTEM_PYTHON, "-c", "import mininet.net"], capture_output=True,
                             text=True)
        if out.returncode != 0:
            raise LabError("the mininet runtime needs Debian's mininet for the system python3: "
                           "apt-get install mininet")

    def create_nodes(self, nodes: Sequence[NodePlan]) -> None:
        for node in nodes:  # first: a kill after this leaves names destroy knows
            self.journal.netns(netns_name(self.lab, node.name))
        names = self.dir / "mininet-nodes.json"
        names.write_text(json.dumps([n.name for n in nodes]))
        # -P: the script's folder (this one) must not shadow Mininet's package `mininet`.
        argv = [SYSTEM_PYTHON, "-P", str(SERVER), str(names), str(self._pids_file)]
        if self.cli:
            argv += ["--cli", str(self._ready_file)]
        if self.cli:  # Mininet's CLI takes over this terminal once the lab is built
            self.server = subprocess.Popen(argv, start_new_session=True)
        else:  # detached: nothing of the caller's (its terminal, its pipes) stays open in it
            with open(self.dir / "mininet.log", "ab") as log:
                self.server = subprocess.Popen(argv, start_new_session=True, stdout=log,
                                               stderr=subprocess.STDOUT,
                                               stdin=subprocess.DEVNULL)
        self.journal.process(self.server.pid, "mininet")
        pids = self._wait_for_pids()
        for node in nodes:
            out = subprocess.run(["ip", "netns", "attach", netns_name(self.lab, node.name),
                                  str(pids[node.name])], capture_output=True, text=True)
            if out.returncode != 0:
                raise LabError(f"{node.name}: cannot name Mininet's namespace: "
                               f"{out.stderr.strip()}")

    def _wait_for_pids(self) -> dict[str, int]:
        assert self.server is not None
        server = self.server
        wait_until(self._pids_file.exists, START_TIMEOUT_S, lambda _: LabError(
            f"Mininet did not create the nodes (exit {server.poll()})"), every=0.05,
            alive=lambda: server.poll() is None)
        return json.loads(self._pids_file.read_text())

    def run_cli(self, plan: LabPlan) -> int:
        """Hand the terminal to Mininet's CLI over the built lab; its exit code once it quits."""
        if self.server is None:
            raise LabError("Mininet's CLI runs only in the `labctl mininet` that deployed it")
        partial = self._ready_file.with_suffix(".partial")
        partial.write_text(json.dumps({
            n.name: [*([["lo", f"{n.loopback4}/32"]] if n.loopback4 else []),
                     *([i.name, i.ipv4] for i in n.interfaces if i.ipv4)]
            for n in plan.nodes}))
        partial.rename(self._ready_file)
        return self.server.wait()

    def destroy(self) -> list[int]:
        """The netns sweep ends Mininet's host shells; the Mininet process is journaled and
        ends with its hosts (it is killed here too when it is our child)."""
        survivors = super().destroy()
        if self.server is not None and self.server.poll() is None:
            survivors += kill_and_reap([self.server.pid])
        return survivors
