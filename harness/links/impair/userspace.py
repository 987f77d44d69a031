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

import signal
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from harness.core.errors import LabError
from harness.core.wait import wait_until
from harness.links.impair import engine
from harness.links.impair.state import LinkState, control_path, state_dir
from harness.linux.journal import process_start_time
from harness.linux.nsenter import run_in
from harness.linux.processes import kill_and_reap
from harness.topology.plan import Endpoint, Impairment

if TYPE_CHECKING:
    from harness.runtime.context import LabContext

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


def _host_pid(lab: LabContext, state: LinkState) -> int | None:
    """The engine's host pid while that very process runs (not a recycled pid)."""
    if not state.pid:
        return None
    pid = lab.runtime.host_pid(state.endpoint.node, state.pid)
    return pid if pid is not None and process_start_time(pid) == state.start_time else None


class UserspaceBackend:
    name = "userspace"

    def apply(self, lab: LabContext, endpoint: Endpoint, impairment: Impairment,
              previous: LinkState | None) -> LinkState:
        if previous and previous.backend == self.name and _host_pid(lab, previous):
            engine.set_live(str(previous.control), impairment)  # no restart, no re-cabling
            return previous.model_copy(update={"impairment": impairment})
        return self._start(lab, endpoint, impairment)

    def _start(self, lab: LabContext, endpoint: Endpoint, impairment: Impairment) -> LinkState:
        node = lab.node(endpoint.node)
        with node.netlink() as ip:
            index = ip.link_lookup(ifname=endpoint.iface)
        if not index:
            raise LabError(f"{endpoint}: no such interface in the node")
        tap, control = tap_name(index[0]), control_path(lab.dir, endpoint)
        state_dir(lab.dir).mkdir(parents=True, exist_ok=True)
        control.unlink(missing_ok=True)
        log = state_dir(lab.dir) / f"{endpoint.node}.{endpoint.iface}.log"
        pid = lab.runtime.spawn(endpoint.node, [
            lab.runtime.program(engine.ENGINE), "run", endpoint.iface, tap, str(control),
            *engine.engine_args(impairment)], log, f"impairment engine {endpoint}")
        host = lab.runtime.host_pid(endpoint.node, pid)
        state = LinkState(endpoint=endpoint, backend=self.name, impairment=impairment,
                          pid=pid, start_time=host and process_start_time(host), tap=tap,
                          control=str(control))
        try:
            self._wait_ready(lab, state, log)
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
    def _wait_ready(lab: LabContext, state: LinkState, log: Path) -> None:
        """Ready once its control socket answers (it binds that last, after the TAP)."""
        wait_until(lambda: engine.stats(str(state.control)), READY_TIMEOUT, lambda _: LabError(
            f"{state.endpoint}: impairment engine did not start: "
            f"{log.read_text().strip()[-300:] or 'no output'}"), every=0.01, until=lambda _: True,
            retry=LabError, alive=lambda: _host_pid(lab, state) is not None)

    def clear(self, lab: LabContext, state: LinkState) -> None:
        lab.node(state.endpoint.node).cmd(*unredirect_argv(state.endpoint.iface))
        if (pid := _host_pid(lab, state)) is not None:
            kill_and_reap([pid], signal.SIGTERM, timeout=STOP_TIMEOUT)
            if _host_pid(lab, state) is not None:
                kill_and_reap([pid])

    def health(self, lab: LabContext, state: LinkState) -> tuple[str, dict[str, int]]:
        if _host_pid(lab, state) is None:
            return "broken: engine not running", {}
        return "active", engine.stats(str(state.control))


def start_scratch(netns_path: str, iface: str, tap: str, control: Path,
                  impairment: Impairment) -> subprocess.Popen:
    """An engine on `iface` of a scratch namespace (tests and benches: no lab, no journal);
    ready and redirected when this returns. Removing the namespace ends it."""
    process = subprocess.Popen(["nsenter", f"--net={netns_path}", str(engine.binary()), "run",
                                iface, tap, str(control), *engine.engine_args(impairment)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until(lambda: engine.stats(str(control)), READY_TIMEOUT, every=0.01, retry=LabError,
               alive=lambda: process.poll() is None)
    for argv in redirect_argv(iface, tap):
        run_in(netns_path, argv)
    return process
