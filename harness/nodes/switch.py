"""A `kind: sai` switch: FRR whose zebra feeds the SAI agent over FPM; transit packets are
forwarded by what the agent programmed, never by zebra's own kernel routes.

How double programming is avoided. zebra 8.4 has no way to turn its kernel dataplane off, so
it still writes its routes to table main. On a switch node that table serves only the CPU, as
the kernel routes of a SONiC box do: the ip rules are `local` (the node's own addresses), then
`iif lo lookup main` (packets the node itself originates: BGP, BFD, pings from the switch, and
the kernel's own gateway checks when zebra installs a nexthop), then `lookup 252` (the SAI
table), and nothing else; the `main` rule is deleted. A packet arriving on a port therefore
only ever matches the SAI table: a route withdrawn in FRR stops forwarding when the agent
removes it, and a route the agent failed to program does not forward though zebra has it.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

from harness.agent.control import SOCKET_NAME, ask
from harness.agent.fpm import FPM_PORT
from harness.errors import LabError
from harness.nodes.frr import Frr
from harness.runtime.journal import Journal
from harness.runtime.processes import kill_and_reap
from harness.sai.kernel import SAI_TABLE
from harness.topology.schema import Kind

RT_TABLE_MAIN = 254
SAI_RULE_PREF = 1000
MAIN_RULE_PREF = 32766
CPU_RULE_PREF = 999
AGENT_START_S = 20.0
ZEBRA_ARGS = ("-M", "dplane_fpm_nl")


def fib_table(kind: Kind) -> int:
    """The kernel table that forwards transit packets on a node of this kind."""
    return SAI_TABLE if kind is Kind.sai else RT_TABLE_MAIN


def fpm_config(port: int = FPM_PORT) -> str:
    # use-next-hop-groups is zebra 8.4's default; said explicitly so the agent's input is fixed.
    return f"!\nfpm address 127.0.0.1 port {port}\nfpm use-next-hop-groups\n!\n"


class Switch:
    def __init__(self, frr: Frr) -> None:
        self.frr = frr
        self.node = frr.node

    @property
    def agent_log(self) -> Path:
        return self.frr.workdir / "agent.log"

    def install_rules(self) -> None:
        """local -> (own traffic: main) -> SAI table -> nothing: see the module docstring."""
        with self.node.netlink() as ip:
            for family in (socket.AF_INET, socket.AF_INET6):
                ip.rule("add", family=family, table=RT_TABLE_MAIN, priority=CPU_RULE_PREF,
                        iifname="lo")
                ip.rule("add", family=family, table=SAI_TABLE, priority=SAI_RULE_PREF)
                ip.rule("del", family=family, table=RT_TABLE_MAIN, priority=MAIN_RULE_PREF)

    def start_agent(self, journal: Journal, capacity: str = "linux") -> int:
        """Start the agent inside the node (the namespace sweep ends it on destroy, and its
        pid is journaled); return once its control socket answers."""
        (self.frr.workdir / SOCKET_NAME).unlink(missing_ok=True)
        with open(self.frr.workdir / "agent.out", "ab") as out:
            proc = self.node.popen([sys.executable, "-m", "harness.agent", "--node-dir",
                                    str(self.frr.workdir), "--capacity", capacity],
                                   stdout=out, stderr=out, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
        journal.process(proc.pid, f"{self.node.name}/sai-agent")
        deadline = time.monotonic() + AGENT_START_S
        while True:
            try:
                return int(ask(self.frr.workdir, {"cmd": "status"}, timeout=2)["pid"])
            except LabError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = (self.frr.workdir / "agent.out").read_text()[-2000:]
                    raise LabError(f"{self.node.name}: the SAI agent did not start; see "
                                   f"{self.agent_log}\n{tail}") from None
                time.sleep(0.05)

    def restart_agent(self, journal: Journal) -> tuple[int | None, int]:
        """Warm restart: SIGKILL the agent (no goodbye, like a crash) and start a new one,
        which reads the kernel back and reconciles with zebra's replay. Returns both pids."""
        try:
            old = int(ask(self.frr.workdir, {"cmd": "status"}, timeout=2)["pid"])
        except LabError:
            old = None
        if old is not None:
            kill_and_reap([old])
        return old, self.start_agent(journal)

    def start(self, journal: Journal, config: str) -> None:
        self.frr.prepare(config + fpm_config())
        self.install_rules()
        self.start_agent(journal)
        self.frr.start(journal, zebra_args=ZEBRA_ARGS)
