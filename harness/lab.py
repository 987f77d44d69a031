"""A Lab: a plan made real. Deploy builds it stage by stage; destroy removes all of it.

Deploy order is namespaces -> links -> FRR -> convergence. Anything that fails (or a Ctrl-C)
before convergence rolls the whole lab back; a lab that is built but does not converge is kept
so it can be inspected, and the error says exactly which sessions and prefixes are missing.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from harness.converge import Convergence, wait_converged
from harness.errors import LabError
from harness.links import impair
from harness.links.veth import queue_addresses, queue_veth
from harness.nodes.frr import FRR_SBIN, FRR_STATE, Frr
from harness.nodes.node import Node
from harness.nodes.switch import Switch
from harness.paths import frr_pathspace, is_lab_name, lab_dir, labs_root
from harness.runtime.base import Runtime
from harness.runtime.journal import Journal
from harness.runtime.netns import NetnsRuntime
from harness.runtime.processes import kill_and_reap
from harness.runtime.rtnl_batch import RtnlBatch
from harness.spray.control import start_sprayers
from harness.topology.plan import LabPlan
from harness.topology.render import render_frr
from harness.topology.schema import Kind

RUNTIMES: dict[str, Callable[[str, Journal], Runtime]] = {"netns": NetnsRuntime}
PLAN_FILE = "plan.json"
JOURNAL_FILE = "journal.jsonl"


@dataclass
class Progress:
    """Deploy reports each stage's progress here; the CLI draws it, tests ignore it."""

    stage: Callable[[str, int], None] = lambda name, total: None
    advance: Callable[[int], None] = lambda n: None
    converge: Callable[[Convergence], None] = lambda conv: None


class Lab:
    def __init__(self, plan: LabPlan, runtime: str = "netns") -> None:
        self.plan = plan
        self.dir = lab_dir(plan.name)
        self.journal = Journal(self.dir / JOURNAL_FILE)
        self.runtime: Runtime = RUNTIMES[runtime](plan.name, self.journal)

    @classmethod
    def open(cls, name: str) -> Lab:
        path = lab_dir(name) / PLAN_FILE
        try:
            plan = LabPlan.model_validate_json(path.read_text())
        except FileNotFoundError:
            raise LabError(f"no lab named {name!r} (no {path}); `labctl list` shows the "
                           "labs that exist") from None
        return cls(plan)

    @cached_property
    def nodes(self) -> dict[str, Node]:
        return {n.name: Node(n, self.runtime) for n in self.plan.nodes}

    def node(self, name: str) -> Node:
        try:
            return self.nodes[name]
        except KeyError:
            raise LabError(f"lab {self.plan.name} has no node {name!r}; nodes: "
                           f"{', '.join(self.nodes)}") from None

    def frr(self, name: str) -> Frr:
        return Frr(self.node(name), self.dir / "nodes" / name, frr_pathspace(self.plan.name, name))

    # -- deploy -------------------------------------------------------------------------------

    def deploy(self, progress: Progress | None = None, *, start_frr: bool = True,
               timeout: float = 120.0) -> Convergence | None:
        progress = progress or Progress()
        if start_frr and not (FRR_SBIN / "zebra").exists():
            raise LabError(f"FRR is not installed ({FRR_SBIN}/zebra is missing): "
                           "`apt-get install frr`, or run `make lab` which installs it")
        self._claim()
        try:
            self._create_nodes_and_links(progress)
            impair.apply_links(self, progress)
            if start_frr:
                self._start_frr(progress)
                start_sprayers(self)  # multi-plane hosts spray per packet over healthy planes
            self._run_exec(progress)
        except BaseException:
            self.destroy()
            raise
        if not start_frr:
            return None
        try:
            progress.stage("converging", len(self.plan.sessions))
            return wait_converged(self, timeout, progress.converge)
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM; a timeout keeps the lab to look at
            self.destroy()
            raise

    def _claim(self) -> None:
        """Refuse to deploy over an existing lab; then write the plan before touching the kernel."""
        leftovers = self.runtime.existing_nodes()
        if self.dir.exists() or leftovers:
            raise LabError(f"lab {self.plan.name!r} already exists; run `labctl destroy "
                           f"{self.plan.name}` first")
        self.dir.mkdir(parents=True)
        self.journal.runtime(self.runtime.name)  # first: it marks the directory as a lab's
        (self.dir / "nodes").mkdir()
        (self.dir / PLAN_FILE).write_text(self.plan.model_dump_json(indent=1))

    def _create_nodes_and_links(self, progress: Progress) -> None:
        """Two netlink batches per node: its loopback and the veths it is side A of, then the
        addresses of every end (B ends exist only once all A sides are committed)."""
        batches: dict[str, RtnlBatch] = {}
        try:
            progress.stage("namespaces", len(self.nodes))
            for node in self.nodes.values():
                self.runtime.create_node(node.name)
                batches[node.name] = node.open_batch()
                progress.advance(1)
            progress.stage("links", len(self.plan.links))
            fds = [queue_veth(batches[link.a.node], self.plan, link,
                              self.runtime.netns_path(link.b.node)) for link in self.plan.links]
            try:
                for node, batch in batches.items():
                    batch.commit()
                    progress.advance(sum(1 for link in self.plan.links if link.a.node == node))
            finally:
                for fd in fds:
                    os.close(fd)
            progress.stage("addresses", len(self.nodes))
            for node in self.nodes.values():
                queue_addresses(batches[node.name], node.plan)
                batches[node.name].commit()
                progress.advance(1)
        finally:
            for batch in batches.values():
                batch.sock.close()

    def _start_frr(self, progress: Progress) -> None:
        progress.stage("FRR", len(self.nodes))

        def start(name: str) -> None:
            frr = self.frr(name)
            config = render_frr(self.plan, self.plan.node(name), str(frr.log_dir / "frr.log"))
            if self.plan.node(name).kind is Kind.sai:
                Switch(frr).start(self.journal, config)
            else:
                frr.prepare(config)
                frr.start(self.journal)
            progress.advance(1)

        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(start, self.nodes))

    def _run_exec(self, progress: Progress) -> None:
        commands = [(n, c) for n in self.plan.nodes for c in n.exec]
        if not commands:
            return
        progress.stage("exec", len(commands))
        for node, command in commands:
            out = self.runtime.run(node.name, ["sh", "-c", command])
            if out.returncode != 0:
                raise LabError(f"{node.name}: exec {command!r} failed ({out.returncode}): "
                               f"{out.stderr.strip()}")
            progress.advance(1)

    # -- destroy ------------------------------------------------------------------------------

    def destroy(self) -> None:
        destroy_lab(self.plan.name)


def destroy_lab(name: str) -> bool:
    """Remove everything of lab `name` that exists: journal first, then a sweep by prefix.

    Returns whether there was anything to remove; returns only once every process of the lab
    is gone. A directory under the labs root that is not a lab's is left alone."""
    directory = lab_dir(name)
    journal = Journal(directory / JOURNAL_FILE)
    if directory.exists() and not is_lab_directory(directory):
        raise LabError(f"{directory} is not a fabric-lab lab (no {PLAN_FILE} or {JOURNAL_FILE}"
                       "); left it alone")
    runtime = RUNTIMES[journal.runtime_name() or "netns"](name, journal)
    existed = directory.exists() or bool(runtime.existing_nodes())
    survivors = runtime.destroy()
    survivors += kill_and_reap([p.pid for p in journal.processes() if p.alive()])
    leftovers = [*journal.paths(), *map(Path, glob.glob(f"{FRR_STATE}/{frr_pathspace(name, '')}*"))]
    for path in leftovers:
        shutil.rmtree(path, ignore_errors=True)
    shutil.rmtree(directory, ignore_errors=True)
    if survivors:
        raise LabError(f"lab {name}: processes {survivors} did not exit after SIGKILL (stuck in "
                       "the kernel?); everything else was removed, run destroy again later")
    return existed


def is_lab_directory(directory: Path) -> bool:
    """A lab's directory holds its journal or plan; a deploy killed right after creating it
    leaves it empty."""
    return any((directory / f).exists() for f in (PLAN_FILE, JOURNAL_FILE)) or \
        not any(directory.iterdir())


def lab_names() -> list[str]:
    """Labs with a directory or with namespaces (a deploy killed before writing its plan)."""
    on_disk = {p.name for p in labs_root().glob("*")
               if p.is_dir() and is_lab_name(p.name) and is_lab_directory(p)}
    return sorted(on_disk | NetnsRuntime.all_lab_names())


def plan_of(name: str) -> LabPlan | None:
    with contextlib.suppress(FileNotFoundError, ValueError):
        return LabPlan.model_validate_json((lab_dir(name) / PLAN_FILE).read_text())
    return None
