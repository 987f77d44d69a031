"""FRR inside a node (zebra, bgpd, bfdd and staticd with a per-node pathspace), and the
`frr` node kind: a router whose zebra programs the kernel FIB itself.

Every daemon gets `-N <netns name>` plus explicit socket, pid, log and config paths under the
node's directory, so many FRR instances coexist on one host and `destroy` finds all their
files. Configuration is one integrated frr.conf applied through vtysh, as `frrinit.sh` does;
every vtysh runs with the node's directory as its config dir, so `write memory` saves the
node's frr.conf in the lab and never the host's own /etc/frr.
"""

from __future__ import annotations

import glob
import json
import os
import shlex
import subprocess
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core.errors import LabError
from harness.core.paths import (
    FRR_RUN,
    FRR_SBIN,
    FRR_STATE,
    bfd_socket_dir,
    bfd_socket_dirs,
    bfdd_socket,
    frr_pathspace,
)
from harness.linux.journal import Journal
from harness.nodes.base import Evidence
from harness.nodes.bfd.offload import ENGINE, bfdd_args, engine_state, feed_path, start_engine
from harness.nodes.neighbours import answers, declared_of, is_up
from harness.nodes.router_id import router_ids
from harness.nodes.vty import vty_show
from harness.runtime.base import NodeImage
from harness.runtime.images import REPOSITORY
from harness.runtime.node import Node
from harness.topology.frr_image import frr_mapping, log_paths_in_lab
from harness.topology.plan import NodePlan
from harness.topology.render import after_boot, render_frr
from harness.topology.schema import Role

if TYPE_CHECKING:
    from harness.runtime.context import LabContext

DAEMONS = ("zebra", "bgpd", "staticd", "bfdd")
CONFIG_LOG = "frr.log"  # a fabric node's config logs every daemon here, to the microsecond
START_TIMEOUT_S = 20.0
ANSWER_TIMEOUT_S = 30.0
NODES_PER_CORE = 25  # up to this many nodes per core, the nominal timeouts hold
STALE_SOCKETS = ("*.vty", "zserv.api")
START_FAILED = 97  # the start script's exit status when a step failed (vtysh's are below 20)
POLL_S = 0.01
RT_TABLE_MAIN = 254


def frr_leftovers(lab: str) -> list[Path]:
    """FRR's per-pathspace state directories of a lab, and where its bfdds meet their BFD
    offloads (both outside the lab directory)."""
    return [*(Path(p) for p in glob.glob(f"{FRR_STATE}/{frr_pathspace(lab, '')}*")),
            *bfd_socket_dirs(lab)]


def patience(nodes: int) -> float:
    """How many times the nominal timeouts a lab's daemons get to start and to answer: its
    nodes share the host's cores while they start and converge (224 nodes on two cores: a
    `vtysh -f` waited more than 30 s for a CPU). The timeouts are there to catch a stuck
    daemon, not a busy host."""
    return max(1.0, nodes / (NODES_PER_CORE * (os.cpu_count() or 1)))


def frr_of(lab: LabContext, name: str) -> Frr:
    """A node's FRR: its pathspace, and its BFD offload unless BFD runs in bfdd (or the
    user configured the node)."""
    node = lab.node(name)
    offload = bool(lab.plan.bfd and node.plan.bfd_offloaded(lab.plan.bfd))
    return Frr(node, lab.node_dir(name), frr_pathspace(lab.plan.name, name),
               bfd_dir=bfd_socket_dir(lab.plan.name, name) if offload else None,
               patience=patience(len(lab.plan.nodes)))


def bfd_news(lab: LabContext, name: str) -> dict[str, str]:
    """Where, inside the node, its BFD sessions' changes are told (to its spray agent, to the
    lab's recorder): the offload engine's feed when the node runs one, else bfdd's own control
    socket."""
    frr = frr_of(lab, name)
    if frr.bfd_dir is not None:
        return {"engine": str(feed_path(frr.bfd_dir))}
    return {"bfdd": str(bfdd_socket(lab.plan.name, name))}


class Frr:
    def __init__(self, node: Node, workdir: Path, pathspace: str, *,
                 bfd_dir: Path | None = None, patience: float = 1.0) -> None:
        """`bfd_dir`: where bfdd hands its sessions to the node's BFD offload (None: bfdd
        runs them itself); `patience` multiplies the start and answer timeouts."""
        self.node = node
        self.start_timeout = START_TIMEOUT_S * patience
        self.answer_timeout = ANSWER_TIMEOUT_S * patience
        self.workdir = workdir
        self.pathspace = pathspace
        self.daemons = tuple(node.plan.daemons or DAEMONS)  # zebra first
        self.bfd_dir = bfd_dir if "bfdd" in self.daemons else None

    @property
    def run_dir(self) -> Path:
        return self.workdir / FRR_RUN

    @property
    def log_dir(self) -> Path:
        return self.workdir / "log"

    @property
    def config_file(self) -> Path:
        return self.workdir / "frr.conf"

    @property
    def boot_file(self) -> Path:
        """What a freshly wired node starts with, when it differs from frr.conf (render.py:
        its BGP neighbours' BFD comes once BGP is up)."""
        return self.run_dir / "boot.conf"

    def prepare(self, config: str, boot: str | None = None) -> None:
        for d in (self.run_dir, self.log_dir):
            d.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(config)
        if boot is not None:
            self.boot_file.write_text(boot)
        # vtysh reads this from its config dir: saves go to the integrated frr.conf beside it.
        (self.workdir / "vtysh.conf").write_text("service integrated-vtysh-config\n")
        for daemon in self.daemons:  # read at start (empty: frr.conf is applied by vtysh)
            self.daemon_config(daemon).touch()

    def daemon_config(self, daemon: str) -> Path:
        """A daemon's own config file, where a `write file` on its vty would land."""
        return self.run_dir / f"{daemon}.conf"

    def daemon_argv(self, daemon: str, extra: tuple[str, ...] = ()) -> list[str]:
        return [str(FRR_SBIN / daemon), "-d", "-N", self.pathspace, "-u", "frr", "-g", "frr",
                "--vty_socket", str(self.run_dir), "-z", str(self.run_dir / "zserv.api"),
                "-i", str(self.run_dir / f"{daemon}.pid"), "-f", str(self.daemon_config(daemon)),
                "--log", f"file:{self.log_dir / daemon}.log", *extra]

    def vtysh_argv(self, *args: str) -> list[str]:
        """vtysh bound to this node: its daemons' sockets and its directory as config dir."""
        return ["vtysh", "--vty_socket", str(self.run_dir), "--config_dir", str(self.workdir),
                *args]

    def clear_stale_sockets(self) -> None:
        """Sockets left by killed daemons would look ready to `start`."""
        for pattern in STALE_SOCKETS:
            for stale in self.run_dir.glob(pattern):
                stale.unlink()

    @property
    def identity_file(self) -> Path:
        """The router IDs of the config a start applies, applied before it."""
        return self.run_dir / "router-ids.conf"

    @property
    def refused_file(self) -> Path:
        """Lines of a user's config that FRR refused, as vtysh reported them."""
        return self.workdir / "refused.txt"

    def refused(self) -> list[str]:
        """vtysh's `line N: % message: text` for each line of frr.conf FRR refused."""
        if not self.refused_file.exists():
            return []
        return [line for line in self.refused_file.read_text().splitlines() if line.strip()]

    def start(self, journal: Journal, zebra_args: tuple[str, ...] = (), *,
              strict: bool = True, config: Path | None = None) -> None:
        """Start the daemons and apply `config` (frr.conf unless given), all in one command
        in the node (`start_script`). `strict`: a refused line is an error (a generated
        config must be accepted whole); else the refused lines are kept in `refused_file`
        and FRR runs with the rest, as a router booting that config would."""
        config = config or self.config_file
        journal.path_outside_lab(FRR_STATE / self.pathspace)
        if self.bfd_dir is not None:
            journal.path_outside_lab(self.bfd_dir)
        timeout = self.start_timeout * len(self.daemons) + self.answer_timeout
        try:
            out = self.node.cmd("sh", "-c", self.start_script(zebra_args, config),
                                timeout=timeout)
        except subprocess.TimeoutExpired:
            raise LabError(f"{self.node.name}: FRR did not start and take its config within "
                           f"{timeout:.0f}s; the host is overloaded (`uptime`) or see "
                           f"{self.log_dir}") from None
        if out.returncode == START_FAILED:
            raise LabError(f"{self.node.name}: {out.stderr.strip()} (see {self.log_dir})")
        for daemon in self.daemons:
            pid = self.daemon_pid(daemon)
            if pid is not None:
                journal.process(pid, f"{self.node.name}/{daemon}")
        if self.bfd_dir is not None:  # it connects to bfdd's socket, now there
            start_engine(self.node, self.bfd_dir, self.log_dir / f"{ENGINE}.log")
        refused = out.stdout.strip()
        if out.returncode != 0 and strict:
            raise LabError(f"{self.node.name}: FRR rejected {config}:\n{refused}")
        self.refused_file.write_text(refused + "\n" if out.returncode != 0 else "")

    def start_script(self, zebra_args: tuple[str, ...], config: Path) -> str:
        """The shell steps of a start, run as one command in the node: on docker each command
        is a `docker exec`, some 60 ms of runc's CPU, and a node took six. FRR gets its
        directories (as the node's own frr user: an image's may have another uid than the
        host's), zebra starts first and the others once its zserv socket is there (they
        connect to it), then vtysh applies `config` when every daemon's vty answers, its
        router IDs first (router_id.py says why). The daemons log in UTC, whatever
        the host's or the image's zone, so their log lines are one clock (harness/instruments/
        recorder.py reads bgpd's). A step that fails exits START_FAILED with
        the reason on stderr; vtysh's own output, refused lines included, is the command's
        stdout."""
        dirs = [self.run_dir, self.log_dir, *([self.bfd_dir] if self.bfd_dir else [])]
        polls = round(self.start_timeout / POLL_S)
        steps = ["export TZ=UTC",  # logs stamped alike on every runtime (the lab's recorder)
                 f'fail() {{ echo "$*" >&2; exit {START_FAILED}; }}',
                 f'wait_for() {{ n=0; while [ ! -e "$1" ]; do n=$((n + 1)); '
                 f'[ "$n" -le {polls} ] || fail "$1 did not appear within '
                 f'{self.start_timeout:.0f}s"; sleep {POLL_S}; done; }}',
                 f"mkdir -p {shlex.join(map(str, dirs))} && chown frr:frr "
                 f"{shlex.join(map(str, dirs))} || fail 'cannot give FRR its directories'"]
        for daemon in self.daemons:
            extra = zebra_args if daemon == "zebra" else \
                bfdd_args(self.bfd_dir) if daemon == "bfdd" and self.bfd_dir else ()
            steps.append(f"{shlex.join(self.daemon_argv(daemon, extra))} || "
                         f"fail '{daemon} failed to start'")
            if daemon == "zebra":
                steps.append(f"wait_for {shlex.quote(str(self.run_dir / 'zserv.api'))}")
        steps += [f"wait_for {shlex.quote(str(self.run_dir / f'{d}.vty'))}"
                  for d in self.daemons]
        ids = router_ids(config.read_text())
        if ids:  # what it refuses, the whole config's pass refuses and reports
            self.identity_file.write_text(ids)
            steps.append(f"{shlex.join(self.vtysh_argv('-f', str(self.identity_file)))} "
                         ">/dev/null 2>&1")
        steps.append(f"exec {shlex.join(self.vtysh_argv('-f', str(config)))} 2>&1")
        return "\n".join(steps)

    def daemon_pid(self, daemon: str) -> int | None:
        """The daemon's host pid, None when it is not running (its pid file holds the pid
        its node sees)."""
        try:
            pid = int((self.run_dir / f"{daemon}.pid").read_text().strip())
        except (OSError, ValueError):
            return None
        return self.node.runtime.host_pid(self.node.name, pid)

    def _vtysh_process(self, args: list[str]) -> subprocess.CompletedProcess[str]:
        """vtysh runs inside the node, so a killed deploy leaves no vtysh outside the lab."""
        timeout = self.answer_timeout
        try:
            return self.node.cmd(*self.vtysh_argv(*args), timeout=timeout)
        except subprocess.TimeoutExpired:
            raise LabError(f"{self.node.name}: vtysh {' '.join(args)} did not answer within "
                           f"{timeout:.0f}s; the node's FRR is stuck or the host is overloaded "
                           "(`uptime`)") from None

    def vtysh(self, *commands: str) -> str:
        args = [a for c in commands for a in ("-c", c)]
        out = self._vtysh_process(args)
        if out.returncode != 0:
            raise LabError(f"{self.node.name}: vtysh {' / '.join(commands)} failed: "
                           f"{out.stderr.strip() or out.stdout.strip()}")
        return out.stdout

    def show_json(self, daemon: str, command: str, *, enable: bool = False) -> Any:
        """A `show ... json` answered by one daemon over its vty socket (no vtysh process);
        `enable` for commands only enable mode has."""
        text = vty_show(self.run_dir / f"{daemon}.vty", command + " json", enable=enable)
        return json.loads(text) if text.strip() else {}

    def bgp_peer_states(self) -> dict[str, str]:
        """Peer address -> BGP FSM state, over every address family."""
        summary = self.show_json("bgpd", "show bgp summary")
        states = {}
        for family in summary.values():
            for peer, info in family.get("peers", {}).items():
                states[peer] = info.get("state", "unknown")
        return states

    def bgp_connections(self) -> dict[str, tuple[int, int]]:
        """Peer address -> how many times its session was established and dropped (BFD going
        down drops it too), over every address family."""
        neighbors = self.show_json("bgpd", "show bgp neighbors")
        return {peer: (n["connectionsEstablished"], n["connectionsDropped"])
                for peer, n in neighbors.items()}

def finish_boot(lab: LabContext, node: NodePlan) -> None:
    """Make what a node booted with its frr.conf, once the lab's BGP is up (render.py)."""
    commands = after_boot(lab.plan, node)
    if commands:
        frr_of(lab, node.name).vtysh(*commands)


NODE_STATES = ("running", "degraded", "down")


@cache
def frr_version() -> str:
    out = subprocess.run([str(FRR_SBIN / "zebra"), "--version"], capture_output=True, text=True)
    return out.stdout.split()[2] if out.returncode == 0 and out.stdout.count(" ") > 1 else "?"


def worse_state(a: str, b: str) -> str:
    return max(a, b, key=NODE_STATES.index)


# What a router's FRR shows, kept as evidence when a lab fails (harness/faults/evidence.py).
FRR_SHOWS = {"bgp_summary": ("bgpd", "show bgp summary"), "routes4": ("zebra", "show ip route"),
             "routes6": ("zebra", "show ipv6 route"), "bfd_peers": ("bfdd", "show bfd peers"),
             "ospf_neighbours": ("ospfd", "show ip ospf neighbor"),
             "ospf_database": ("ospfd", "show ip ospf database"),
             "ospf6_neighbours": ("ospf6d", "show ipv6 ospf6 neighbor")}


class FrrKind:
    name = "frr"
    fib_table = RT_TABLE_MAIN
    port_engine = False
    needs: Mapping[str, str] = {}
    zebra_args: tuple[str, ...] = ()

    def image(self, node: NodePlan) -> NodeImage:
        """Routers run the switch image and hosts the host image (its traffic tools); a
        user's FRR image becomes FRR with its own config."""
        built = "host" if node.role is Role.host else "switch"
        return NodeImage(f"{REPOSITORY}/{built}", frr_mapping(node))

    def wire(self, lab: LabContext, node: NodePlan) -> None:
        """Nothing beyond its links and addresses."""

    def evidence(self, lab: LabContext, node: NodePlan) -> Evidence:
        frr = frr_of(lab, node.name)
        return {"frr": {key: (lambda d=daemon, c=command: frr.show_json(d, c))
                        for key, (daemon, command) in FRR_SHOWS.items() if daemon in frr.daemons}}

    def config(self, lab: LabContext, node: NodePlan, frr: Frr, *, boot: bool = False) -> str:
        """A fabric node's config is rendered from the plan; a user's is used as it is.
        `boot`: what a fabric node boots with (render.py)."""
        if node.user_configured:
            text = Path(node.frr_config).read_text() if node.frr_config else ""
            return log_paths_in_lab(text, frr.log_dir)
        return render_frr(lab.plan, node, str(frr.log_dir / CONFIG_LOG), boot=boot)

    def start(self, lab: LabContext, node: NodePlan) -> None:
        """A fabric node boots with its boot config, which `finish_boot` makes its frr.conf
        once the lab's BGP is up (render.py says why); a crashed node restarts with frr.conf."""
        frr = frr_of(lab, node.name)
        boot = self.config(lab, node, frr, boot=True) if after_boot(lab.plan, node) else None
        frr.prepare(self.config(lab, node, frr), boot)
        self.before_frr(lab, node, fresh=True)
        frr.start(lab.journal, self.zebra_args, strict=not node.user_configured,
                  config=frr.boot_file if boot is not None else None)

    def restart(self, lab: LabContext, node: NodePlan) -> None:
        frr = frr_of(lab, node.name)
        frr.clear_stale_sockets()
        self.before_frr(lab, node, fresh=False)
        frr.start(lab.journal, self.zebra_args, strict=not node.user_configured)

    def converged(self, lab: LabContext, node: NodePlan) -> None:
        """Nothing waits for the routes."""

    def before_frr(self, lab: LabContext, node: NodePlan, *, fresh: bool) -> None:
        """What must run before FRR's daemons start; `fresh` on a just-wired node, not after
        a crash (whose kernel state is still there)."""

    def status(self, lab: LabContext, node: NodePlan) -> dict[str, Any]:
        frr = frr_of(lab, node.name)
        dead = [d for d in frr.daemons if frr.daemon_pid(d) is None]
        if node.user_configured:
            return user_frr_status(lab, frr, node, dead)
        planned = {s.peer_ip for s in lab.plan.sessions_of(node.name)}
        try:
            states = frr.bgp_peer_states() if "bgpd" not in dead else {}
        except LabError:
            states = {}
        up = sum(1 for peer in planned if states.get(peer) == "Established")
        state = "down" if "zebra" in dead or "bgpd" in dead else "degraded" if dead else \
            "running"
        status = {"bgp_up": up, "bgp_total": len(planned), "daemons_down": dead, "state": state}
        return {**status, **offload_status(frr, state, dead)}


def offload_status(frr: Frr, state: str, dead: list[str]) -> dict[str, Any]:
    """Column `bfd` when the node's BFD offload has something to say: restarted by its
    supervisor (and how the last one ended), or not running, bfdd keeping the sessions in its
    own packet loop (degraded: the lab's CPU budget assumed the offload)."""
    engine = engine_state(frr.bfd_dir) if frr.bfd_dir and "bfdd" not in dead else None
    if engine is None:
        return {}
    if frr.node.runtime.host_pid(frr.node.name, engine.pid) is None:
        return {"bfd": "offload down: bfdd runs the sessions",
                "state": worse_state(state, "degraded")}
    if engine.restarts:
        return {"bfd": f"offload restarted {engine.restarts}x (last {engine.last_exit})"}
    return {}


def user_frr_status(lab: LabContext, frr: Frr, node: NodePlan, dead: list[str]) -> dict[str, Any]:
    """A user-configured router: its declared neighbours up, and lines FRR refused."""
    wanted = declared_of(lab, node.name)
    state = answers(frr)
    up = {n for n in wanted if is_up(n, state)}
    bgp = [n for n in wanted if n.protocol == "bgp"]
    ospf = [n for n in wanted if n.protocol != "bgp"]
    missing = [str(n).removeprefix(f"{node.name} ") for n in wanted if n not in up]
    return {"bgp_up": len(up.intersection(bgp)), "bgp_total": len(bgp),
            "ospf": f"{len(up.intersection(ospf))}/{len(ospf)}",
            "neighbours_down": ", ".join(missing) or "-", "refused_lines": len(frr.refused()),
            "daemons_down": dead,
            "state": "down" if "zebra" in dead else "degraded" if dead or missing else
            "running"}
