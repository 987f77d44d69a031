"""The userspace backend: where the kernel has no sch_netem, a forwarder process impairs.

tc on the interface redirects every egress frame (clsact egress, u32 match-all, mirred) to a
TAP that the engine owns; the engine takes each frame, with the kernel's timestamp, from a
packet socket on the TAP and sends it back out of the interface with PACKET_QDISC_BYPASS after
holding it (fl_impair.c says why). Only impaired endpoints get the filter and the process.
The interface never changes state, so FRR sees nothing but the new delay; live changes go
over the engine's control socket.

The TAP is the engine's (not persistent): if the engine dies the TAP goes with it, and `show`
reports the endpoint as broken instead of claiming an impairment that is not there.
"""

from __future__ import annotations

import select
import signal
import subprocess
from typing import TYPE_CHECKING

from harness.errors import LabError
from harness.links.impair import engine
from harness.links.impair.state import LinkState, control_path, state_dir
from harness.runtime.journal import process_start_time
from harness.runtime.processes import kill_and_reap
from harness.topology.plan import Endpoint, Impairment

if TYPE_CHECKING:
    from harness.lab import Lab

FILTER_PREF = "7"  # our filter's slot on clsact egress, so clear removes only ours
READY_TIMEOUT = 5.0
STOP_TIMEOUT = 3.0  # the engine sends what it still holds (bounded at 2 s) before exiting


def tap_name(ifindex: int) -> str:
    return f"fli{ifindex}"


def redirect_argv(iface: str, tap: str) -> list[list[str]]:
    return [["tc", "qdisc", "replace", "dev", iface, "clsact"],
            ["tc", "filter", "add", "dev", iface, "egress", "pref", FILTER_PREF, "protocol",
             "all", "u32", "match", "u32", "0", "0", "action", "mirred", "egress", "redirect",
             "dev", tap]]


def unredirect_argv(iface: str) -> list[str]:
    return ["tc", "filter", "del", "dev", iface, "egress", "pref", FILTER_PREF]


def _alive(state: LinkState | None) -> bool:
    return bool(state and state.pid and process_start_time(state.pid) == state.start_time)


class UserspaceBackend:
    name = "userspace"

    def apply(self, lab: Lab, endpoint: Endpoint, impairment: Impairment,
              previous: LinkState | None) -> LinkState:
        if previous and previous.backend == self.name and _alive(previous):
            engine.set_live(str(previous.control), impairment)  # no restart, no re-cabling
            return previous.model_copy(update={"impairment": impairment})
        return self._start(lab, endpoint, impairment)

    def _start(self, lab: Lab, endpoint: Endpoint, impairment: Impairment) -> LinkState:
        node = lab.node(endpoint.node)
        with node.netlink() as ip:
            index = ip.link_lookup(ifname=endpoint.iface)
        if not index:
            raise LabError(f"{endpoint}: no such interface in the node")
        tap, control = tap_name(index[0]), control_path(lab.dir, endpoint)
        state_dir(lab.dir).mkdir(parents=True, exist_ok=True)
        log = (state_dir(lab.dir) / f"{endpoint.node}.{endpoint.iface}.log").open("ab")
        proc = node.popen([str(engine.binary()), "run", endpoint.iface, tap, str(control),
                           *engine.engine_args(impairment)], stdout=subprocess.PIPE,
                          stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        lab.journal.process(proc.pid, f"impairment engine {endpoint}")
        state = LinkState(endpoint=endpoint, backend=self.name, impairment=impairment,
                          pid=proc.pid, start_time=process_start_time(proc.pid), tap=tap,
                          control=str(control))
        try:
            self._wait_ready(proc, lab, endpoint)
            node.cmd(*unredirect_argv(endpoint.iface))  # a filter left by a dead engine
            for argv in redirect_argv(endpoint.iface, tap):
                out = node.cmd(*argv)
                if out.returncode != 0:
                    raise LabError(f"{endpoint}: `{' '.join(argv)}` failed: "
                                   f"{out.stderr.strip()}")
        except BaseException:
            self.clear(lab, state)
            raise
        return state

    @staticmethod
    def _wait_ready(proc: subprocess.Popen, lab: Lab, endpoint: Endpoint) -> None:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], READY_TIMEOUT)
        line = proc.stdout.readline().decode().strip() if ready else ""
        proc.stdout.close()
        if line != "ready":
            log = state_dir(lab.dir) / f"{endpoint.node}.{endpoint.iface}.log"
            raise LabError(f"{endpoint}: impairment engine did not start: "
                           f"{log.read_text().strip()[-300:] or 'no output'}")

    def clear(self, lab: Lab, state: LinkState) -> None:
        lab.node(state.endpoint.node).cmd(*unredirect_argv(state.endpoint.iface))
        if _alive(state):
            assert state.pid is not None
            kill_and_reap([state.pid], signal.SIGTERM, timeout=STOP_TIMEOUT)
            if _alive(state):
                kill_and_reap([state.pid])

    def health(self, lab: Lab, state: LinkState) -> tuple[str, dict[str, int]]:
        if not _alive(state):
            return "broken: engine not running", {}
        return "active", engine.stats(str(state.control))
