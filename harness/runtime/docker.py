"""The docker runtime: one container per node from a locally built image (images/), as
containerlab does it: an empty network namespace of its own (networking disabled), the lab's
veths moved into it, FRR and the agent running inside the image, nothing of the lab on the host.

Containers are created and looked up through dockerd's Engine API (docker_engine), which can
create a container with networking disabled: half the cost of `docker run --network none`.
Commands in nodes run with the docker CLI, not the Python SDK: the CLI is what an operator uses
to look at the same containers, `docker exec -it` gives vtysh a real terminal, and it keeps one
dependency less pinned against the host's dockerd (20.10 on Debian 12).

Each container binds the lab directory at the same path, so a node's FRR sockets, logs, pid
files and helper state read the same from the host (tests, inspect) and from inside the node.
`docker exec` does not pass signals on, so processes the caller waits for are signalled in
the container through their pid file (`ExecProcess`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness.core.errors import LabError
from harness.core.paths import NETNS_PREFIX, frr_run_dir, is_lab_name, lab_dir, netns_name
from harness.core.wait import NotReady, wait_until
from harness.linux.features import has
from harness.linux.journal import Journal
from harness.linux.vrf import VRF_STRICT
from harness.runtime import docker_engine, images
from harness.runtime.base import ImageOf
from harness.runtime.images import image_for
from harness.topology.plan import LabPlan, NodePlan

LAB_LABEL, NODE_LABEL = "fabric-lab.lab", "fabric-lab.node"
PROJECT = Path("/opt/fabric-lab")  # where the image keeps the project (images/Dockerfile)
# What FRR, the agent, the sprayer and the impairment engine need, and nothing more: links,
# routes, rules, nftables and qdiscs (NET_ADMIN), raw and packet sockets (NET_RAW), BGP's
# port (NET_BIND_SERVICE), FRR dropping to its user (SETUID/SETGID) and owning its files.
# SYS_ADMIN only because FRR 8.4's zebra refuses to start without it in its permitted set
# (`privs_init: initial cap_set_proc failed`); Docker's seccomp profile stays on.
# SYS_NICE lets the engines raise their priority (nice -10, real time); /dev/net/tun their TAPs.
CAPABILITIES = ("NET_ADMIN", "NET_RAW", "NET_BIND_SERVICE", "SETUID", "SETGID", "CHOWN",
                "DAC_OVERRIDE", "FOWNER", "KILL", "SYS_ADMIN", "SYS_NICE")
DEVICES = ("/dev/net/tun",)
# Docker turns IPv6 off in containers; every link and loopback here is dual-stack.
SYSCTLS = {"net.ipv6.conf.all.disable_ipv6": "0", "net.ipv6.conf.default.disable_ipv6": "0"}
CREATE_WORKERS = 8
SPAWN_TIMEOUT_S = 10.0


def docker(*argv: str, timeout: float | None = 120,
           check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        out = subprocess.run(["docker", *argv], capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise LabError("the docker runtime needs docker: apt-get install docker.io") from None
    if check and out.returncode != 0:
        raise LabError(f"docker {argv[0]} failed: {out.stderr.strip()}")
    return out


class ExecProcess(subprocess.Popen):
    """A `docker exec` whose terminate() and kill() reach the process in the container."""

    def __init__(self, runtime: DockerRuntime, node: str, argv: Sequence[str], pidfile: Path,
                 **kwargs: object) -> None:
        self._runtime, self._node, self._pidfile = runtime, node, pidfile
        interactive = ["-i"] if kwargs.get("stdin") == subprocess.PIPE else []
        super().__init__(["docker", "exec", *interactive, runtime.container(node), "sh", "-c",
                          'echo $$ > "$0"; exec "$@"', str(pidfile), *argv],
                         **kwargs)  # type: ignore[call-overload]

    def wait(self, timeout: float | None = None) -> int:
        """Once the command has ended, its pid file is of no more use: a lab that runs
        traffic for hours would otherwise gather one per command."""
        code = super().wait(timeout)
        self._pidfile.unlink(missing_ok=True)
        return code

    def send_signal(self, sig: int) -> None:
        if self.poll() is not None:
            return
        pid = self._runtime.wait_pidfile(self._pidfile)
        host = self._runtime.host_pid(self._node, pid) if pid else None
        if host is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(host, sig)


class DockerRuntime:
    name = "docker"
    # Commands could start through fl-mergeable in the container, but docker's seccomp
    # profile refuses its personality change, and with address-space randomisation on little
    # merges: the agents' Python objects all point at randomised addresses.
    cannot_share_memory = ("docker's seccomp profile refuses the personality change that makes "
                           "its nodes' pages match")

    def __init__(self, lab: str, journal: Journal) -> None:
        self.lab = lab
        self.journal = journal
        self.dir = lab_dir(lab)
        self._init_pids: dict[str, int] = {}
        self._pid_maps: dict[str, dict[int, int]] = {}
        self._serial = itertools.count()

    def container(self, node: str) -> str:
        return netns_name(self.lab, node)  # 'fl.<lab>.<node>', as the netns runtime names it

    # -- deploy -------------------------------------------------------------------------------

    def prepare(self, plan: LabPlan, image_of: ImageOf) -> LabPlan:
        """Each node's image, resolved to the tag built from this checkout."""
        nodes, notes, resolved = [], [], {}
        for node in plan.nodes:
            image, note = image_for(node, image_of(node))
            if image not in resolved:  # one docker query per image, not per node
                resolved[image] = images.resolve(image)
            nodes.append(node.model_copy(update={"image": resolved[image]}))
            notes += [note] if note else []
        return plan.model_copy(update={"nodes": nodes,
                                       "notes": list(dict.fromkeys([*plan.notes, *notes]))})

    def check(self, plan: LabPlan, *, start: bool) -> None:
        docker_engine.version()  # a LabError saying how to start dockerd when none answers

    def create_nodes(self, nodes: Sequence[NodePlan]) -> None:
        for node in nodes:  # first: a kill before `docker run` returns leaves known names
            self.journal.container(self.container(node.name))

        def create(node: NodePlan) -> None:
            assert node.image is not None  # prepare() filled it in
            pid = docker_engine.run_container(self.container(node.name), node.image,
                                              self._settings(node))
            if pid > 0:  # wiring needs every node's namespace
                self._init_pids[node.name] = pid

        with ThreadPoolExecutor(max_workers=CREATE_WORKERS) as pool:
            list(pool.map(create, nodes))

    def _settings(self, node: NodePlan) -> dict[str, object]:
        """The container as `docker run --init --network none --cap-drop ALL` would make it,
        with the file's env and binds; a user's FRR node shows its sockets at /run/frr, so a
        plain `vtysh` in it talks to its daemons, as in an FRR image."""
        binds = [f"{self.dir}:{self.dir}", *(str(b) for b in node.binds)]
        if node.runs_own_frr:
            binds.append(f"{frr_run_dir(self.lab, node.name)}:/run/frr")
        devices = [{"PathOnHost": d, "PathInContainer": d, "CgroupPermissions": "rwm"}
                   for d in DEVICES]
        # An SRv6 router's End.DT4/End.DT46 need the VRF strict mode
        # (harness/nodes/switch/sai/seg6.py), which its read-only /proc/sys cannot take later; the
        # key exists once VRF is loaded.
        sysctls = {**SYSCTLS, VRF_STRICT: "1"} if node.locator and has("vrf") else SYSCTLS
        return {"Hostname": node.name, "Env": [f"{k}={v}" for k, v in node.env.items()],
                "Labels": {LAB_LABEL: self.lab, NODE_LABEL: node.name},
                "HostConfig": {"Init": True, "NetworkMode": "none", "CapDrop": ["ALL"],
                               "CapAdd": list(CAPABILITIES), "Sysctls": sysctls,
                               "Devices": devices, "Binds": binds}}

    def confine(self, node: str, argv: Sequence[str]) -> list[str]:
        """The container's own filesystem and env already confine the user's commands."""
        return list(argv)

    # -- inside a node ------------------------------------------------------------------------

    def init_pid(self, node: str) -> int:
        """Host pid of the container's init, whose namespaces are the node's."""
        if node not in self._init_pids:
            pid = docker_engine.init_pid(self.container(node))
            if pid <= 0:
                raise LabError(f"node {node} ({self.container(node)}) is not running")
            self._init_pids[node] = pid
        return self._init_pids[node]

    def netns_path(self, node: str) -> str:
        return f"/proc/{self.init_pid(node)}/ns/net"

    def host_path(self, node: str, path: Path) -> Path:
        return Path(f"/proc/{self.init_pid(node)}/root") / path.relative_to("/")

    def run(self, node: str, argv: Sequence[str], *, timeout: float | None = 60,
            input: str | None = None, check: bool = False) -> subprocess.CompletedProcess[str]:
        interactive = ["-i"] if input is not None else []
        return subprocess.run(["docker", "exec", *interactive, self.container(node), *argv],
                              capture_output=True, text=True, timeout=timeout, input=input,
                              check=check)

    def _pidfile(self, node: str) -> Path:
        run = self.dir / "nodes" / node / "exec"
        run.mkdir(parents=True, exist_ok=True)
        return run / f"{os.getpid()}.{next(self._serial)}.pid"

    def popen(self, node: str, argv: Sequence[str], **kwargs: object) -> subprocess.Popen:
        return ExecProcess(self, node, argv, self._pidfile(node), **kwargs)

    def spawn(self, node: str, argv: Sequence[str], log: Path, what: str) -> int:
        """A detached exec: the helper lives in the container, which owns it (removing the
        container ends it), so no process of it stays on the host."""
        pidfile = self._pidfile(node)
        docker_engine.exec_detached(self.container(node), [
            "sh", "-c", 'echo $$ > "$0"; log="$1"; shift; exec "$@" >> "$log" 2>&1',
            str(pidfile), str(log), *argv])
        pid = self.wait_pidfile(pidfile)
        if pid is None:
            raise LabError(f"{node}: {what} did not start within {SPAWN_TIMEOUT_S:.0f}s")
        return pid

    @staticmethod
    def wait_pidfile(pidfile: Path) -> int | None:
        with contextlib.suppress(NotReady):
            return wait_until(lambda: int(pidfile.read_text()), SPAWN_TIMEOUT_S, every=0.01,
                              retry=(OSError, ValueError))
        return None

    def _scan(self, node: str) -> dict[int, int]:
        """Container pid -> host pid of every process in the node's pid namespace."""
        init = self.init_pid(node)
        pidns = os.stat(f"/proc/{init}/ns/pid").st_ino
        found = {}
        for entry in filter(str.isdigit, os.listdir("/proc")):
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{entry}/ns/pid").st_ino != pidns:
                    continue
                for line in Path(f"/proc/{entry}/status").read_text().splitlines():
                    if line.startswith("NSpid:"):
                        found[int(line.split()[-1])] = int(entry)
        return found

    def host_pid(self, node: str, pid: int) -> int | None:
        host = self._pid_maps.get(node, {}).get(pid)
        if host is None or _nspid(host) != pid:
            self._pid_maps[node] = self._scan(node)
            host = self._pid_maps[node].get(pid)
        return host

    def node_processes(self, node: str) -> list[int]:
        """Everything but the container's init and the `sleep` it keeps the container with."""
        init = self.init_pid(node)
        return [host for pid, host in self._scan(node).items()
                if pid != 1 and not (_parent(host) == init and _cmdline(host) == CMD)]

    def python(self, module: str, *args: str) -> list[str]:
        return ["python3", "-m", module, *args]  # the image sets PYTHONPATH to the project

    def program(self, name: str) -> str:
        return str(PROJECT / "bin" / name)

    def interactive(self, node: str, argv: Sequence[str]) -> int:
        terminal = ["-t"] if sys.stdin.isatty() else []  # pipes and scripts work too
        return subprocess.call(["docker", "exec", "-i", *terminal, self.container(node), *argv])

    # -- lifetime -----------------------------------------------------------------------------

    def existing_nodes(self) -> list[str]:
        return [node for _, node in containers(f"{LAB_LABEL}={self.lab}")]

    def destroy(self) -> list[int]:
        names = {self.container(n) for n in self.existing_nodes()}
        names |= {n for n in self.journal.containers()
                  if n.startswith(f"{NETNS_PREFIX}.{self.lab}.")}
        if names:
            out = docker("rm", "--force", "--volumes", *sorted(names), check=False)
            missing = "No such container"
            errors = [line for line in out.stderr.splitlines() if missing not in line]
            if errors:
                raise LabError(f"docker could not remove {self.lab}'s containers: "
                               + "; ".join(errors))
        return []

    @staticmethod
    def all_lab_names() -> set[str]:
        return {lab for lab, _ in containers(LAB_LABEL) if is_lab_name(lab)}


def containers(label: str) -> list[tuple[str, str]]:
    """(lab, node) of every container with `label` (a key, or key=value)."""
    try:
        found = docker_engine.container_labels(label)
    except LabError:  # no dockerd: then there are no containers either
        return []
    return [(labels.get(LAB_LABEL, ""), labels.get(NODE_LABEL, "")) for labels in found]


CMD = "sleep\0infinity"  # the image's CMD (images/Dockerfile)


def _status_field(pid: int, field: str) -> str | None:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return line.split(":", 1)[1].strip()
    return None


def _nspid(host: int) -> int | None:
    value = _status_field(host, "NSpid")
    return int(value.split()[-1]) if value else None


def _parent(host: int) -> int | None:
    value = _status_field(host, "PPid")
    return int(value) if value else None


def _cmdline(host: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{host}/cmdline").read_text().rstrip("\0")
    return ""
