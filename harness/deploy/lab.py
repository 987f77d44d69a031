"""A Lab: a plan made real with the runtime it names. `deploy()` is the one way in, from a
topology file or a plan: it claims the lab, runs the stages of harness/deploy/stages.py and
rolls back whatever fails; `destroy_lab` removes all of it, also after a deploy killed
half-way.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from harness.core.errors import LabError
from harness.core.events import say
from harness.core.paths import is_lab_name, lab_dir, labs_root
from harness.deploy.converge import Convergence
from harness.deploy.stages import Progress, Stage, deploy_stages
from harness.faults.evidence import archive
from harness.instruments.recording import start_recorder
from harness.linux import ksm
from harness.linux.features import hold_neighbour_limits, neighbour_room, release_neighbour_limits
from harness.linux.journal import Journal
from harness.linux.processes import kill_and_reap
from harness.nodes.base import NodeKind
from harness.nodes.frr import Frr, frr_leftovers, frr_of
from harness.nodes.kind import image_of, kind_of
from harness.runtime import all_runtimes, labs_with_nodes, open_runtime
from harness.runtime.context import LabContext
from harness.spray.nic import probe_timing, spraying_hosts
from harness.topology.pipeline import plan_from_file
from harness.topology.plan import LabPlan

PLAN_FILE = "plan.json"
JOURNAL_FILE = "journal.jsonl"
EVIDENCE_ENV = "FABRIC_LAB_EVIDENCE_DIR"


class Lab(LabContext):
    def __init__(self, plan: LabPlan, runtime: str | None = None,
                 share_memory: str = "auto") -> None:
        """`runtime` overrides the plan's (a fresh deploy); a reopened lab keeps its own, and
        whether it shares memory (`share_memory`, one of ksm.CHOICES, decides a fresh one)."""
        if runtime is not None and runtime != plan.runtime:
            plan = plan.model_copy(update={"runtime": runtime})
        directory = lab_dir(plan.name)
        journal = Journal(directory / JOURNAL_FILE)
        engine = open_runtime(plan.runtime, plan.name, journal)
        if plan.share_memory is None:
            shared, note = ksm.decide(plan, share_memory, engine.cannot_share_memory)
            plan = plan.model_copy(update={"share_memory": shared,
                                           "notes": [*plan.notes, *([note] if note else [])]})
        super().__init__(plan, directory, engine, journal)
        self.plan = self.runtime.prepare(plan, image_of)
        self.host_changes: list[str] = []  # host-wide settings this deploy changed, said once
        self.convergence: Convergence | None = None  # what the deploy's last stage found

    def frr(self, name: str) -> Frr:
        return frr_of(self, name)

    def kind(self, name: str) -> NodeKind:
        return kind_of(self, name)

    @classmethod
    def open(cls, name: str) -> Lab:
        path = lab_dir(name) / PLAN_FILE
        try:
            plan = LabPlan.model_validate_json(path.read_text())
        except FileNotFoundError:
            raise LabError(f"no lab named {name!r} (no {path}); `labctl list` shows the "
                           "labs that exist") from None
        return cls(plan)

    def deploy(self, progress: Progress | None = None, *, start_frr: bool = True,
               timeout: float = 120.0, stages: list[Stage] | None = None,
               raise_neighbour_limits: bool = False) -> Convergence | None:
        """`raise_neighbour_limits`: where the host's neighbour tables cannot hold the lab,
        raise them for it (kept in `host_changes`) rather than refuse; the host's values
        come back when the last lab that raised them is destroyed."""
        progress = progress or Progress()
        stages = stages if stages is not None else deploy_stages(start=start_frr,
                                                                  timeout=timeout)
        for note in grouped_notes(self.plan):  # what was not taken as it is
            progress.note(note, True)
        if timing := probe_timing(self.plan):  # a trade-off when stretched: said up front
            progress.note(timing.describe(len(spraying_hosts(self.plan))), timing.stretched)
        self.runtime.check(self.plan, start=start_frr)
        problem = neighbour_room(self.plan) if start_frr else None  # wired only: no sessions
        if problem and not raise_neighbour_limits:
            raise LabError(f"cannot deploy {self.plan.name} ({self.plan.source}): {problem}")
        self._claim()
        if problem:
            try:
                self.host_changes = hold_neighbour_limits(self.plan, str(self.dir))
            except BaseException:
                self.destroy()
                raise
        result, began = None, time.monotonic()
        for stage in stages:
            try:
                result = stage.run(self, progress)
            except KeyboardInterrupt:  # Ctrl-C or SIGTERM: nothing half-built stays
                self.destroy()
                raise
            except BaseException:
                if stage.rolls_back:
                    self.destroy()
                raise
        self.convergence = result
        if result is not None:
            self._record(result, time.monotonic() - began)
        return result

    def _record(self, result: Convergence, seconds: float) -> None:
        """From here on the lab keeps its event record: the deploy's own event, then what the
        recorder sees (a lab that is not whole, a timed-out deploy kept to look at, too)."""
        say(self.dir, "deploy", "converged" if result.done else "timed out",
            nodes=len(self.plan.nodes), seconds=round(seconds, 3),
            sessions=result.sessions_total, sessions_down=len(result.sessions_down),
            routes=result.routes_total, nodes_short=sorted(result.nodes_short()))
        try:
            start_recorder(self)
        except BaseException:
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

    def destroy(self) -> None:
        """Also archives the lab's evidence first when it goes because something failed (an
        exception in flight, as in the `finally` of a bench) and $FABRIC_LAB_EVIDENCE_DIR names
        where: the nightly sets it, so a failed step keeps what its labs showed."""
        failing, keep = sys.exc_info()[1], os.environ.get(EVIDENCE_ENV)
        if keep and isinstance(failing, Exception) and self.dir.exists():
            with contextlib.suppress(Exception):  # evidence is a bonus; removal must happen
                archive(self, Path(keep) / self.plan.name)
        destroy_lab(self.plan.name)


def deploy(source: str | Path | LabPlan, *, name: str | None = None,
           node_filter: Sequence[str] | None = None, runtime: str | None = None,
           share_memory: str = "auto", progress: Progress | None = None, start: bool = True,
           timeout: float = 120.0, stages: list[Stage] | None = None,
           raise_neighbour_limits: bool = False) -> Lab:
    """The one way a lab comes up, for labctl, tests, bench, training and ansible alike: a
    topology file (or a plan already made) -> plan -> claim -> stages -> converged, rolled
    back whole when a stage fails. `name` runs a copy under another name; `runtime` overrides
    the plan's; `start=False` wires the lab and runs nothing in it. The lab's `convergence` is
    what the last stage found."""
    if isinstance(source, LabPlan):
        plan = source.model_copy(update={"name": name}) if name else source
    else:
        plan = plan_from_file(source, name, node_filter)
    lab = Lab(plan, runtime, share_memory)
    lab.deploy(progress, start_frr=start, timeout=timeout, stages=stages,
               raise_neighbour_limits=raise_neighbour_limits)
    return lab


def grouped_notes(plan: LabPlan) -> list[str]:
    """`NODE: message` notes said once per message, with the nodes it is about."""
    nodes = {n.name for n in plan.nodes}
    by_message: dict[str, list[str]] = {}
    for note in plan.notes:
        node, sep, message = note.partition(": ")
        key, who = (message, node) if sep and node in nodes else (note, "")
        by_message.setdefault(key, []).extend([who] if who else [])
    return [f"{', '.join(who)}: {message}" if who else message
            for message, who in by_message.items()]


def destroy_lab(name: str) -> bool:
    """Remove everything of lab `name` that exists: journal first, then a sweep by prefix.

    Returns whether there was anything to remove; returns only once every process of the lab
    is gone. A directory under the labs root that is not a lab's is left alone."""
    directory = lab_dir(name)
    journal = Journal(directory / JOURNAL_FILE)
    if directory.exists() and not is_lab_directory(directory):
        raise LabError(f"{directory} is not a fabric-lab lab (no {PLAN_FILE} or {JOURNAL_FILE}"
                       "); left it alone")
    recorded = journal.runtime_name()  # None: killed before its first line, sweep them all
    runtimes = [open_runtime(recorded, name, journal)] if recorded else \
        all_runtimes(name, journal)
    existed = directory.exists() or any(r.existing_nodes() for r in runtimes)
    survivors = [pid for r in runtimes for pid in r.destroy()]
    survivors += kill_and_reap([p.pid for p in journal.processes() if p.alive()])
    for path in [*journal.paths(), *frr_leftovers(name)]:
        shutil.rmtree(path, ignore_errors=True)
    shutil.rmtree(directory, ignore_errors=True)
    release_host_settings(str(directory))
    if survivors:
        raise LabError(f"lab {name}: processes {survivors} did not exit after SIGKILL (stuck in "
                       "the kernel?); everything else was removed, run destroy again later")
    return existed


def release_host_settings(holder: str | None) -> None:
    """The host-wide settings `holder` (a lab directory; None: every lab that is gone) relied
    on come back to the host's values once no lab holds them (linux/hostwide.py)."""
    ksm.stop_merging(holder)
    release_neighbour_limits(holder)


def is_lab_directory(directory: Path) -> bool:
    """A lab's directory holds its journal or plan; a deploy killed right after creating it
    leaves it empty."""
    return any((directory / f).exists() for f in (PLAN_FILE, JOURNAL_FILE)) or \
        not any(directory.iterdir())


def lab_names() -> list[str]:
    """Labs with a directory or with nodes (a deploy killed before writing its plan)."""
    on_disk = {p.name for p in labs_root().glob("*")
               if p.is_dir() and is_lab_name(p.name) and is_lab_directory(p)}
    return sorted(on_disk | labs_with_nodes())


def plan_of(name: str) -> LabPlan | None:
    with contextlib.suppress(FileNotFoundError, ValueError):
        return LabPlan.model_validate_json((lab_dir(name) / PLAN_FILE).read_text())
    return None
