"""Deploy as a list of named stages over a `LabContext`: nodes -> wire -> impair -> nics ->
start -> exec -> converge. Every stage but the last rolls the whole lab back when it fails (or on
Ctrl-C); a lab that is built but does not converge is kept, so it can be inspected.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from harness.core.errors import LabError
from harness.deploy.converge import Convergence, wait_bfd_up, wait_converged
from harness.deploy.memory import MemoryRoom
from harness.links import impair
from harness.links.veth import queue_addresses, queue_veth
from harness.linux import ksm
from harness.linux.nsenter import write_sysctls
from harness.linux.rtnl_batch import RtnlBatch
from harness.nodes.frr import finish_boot
from harness.nodes.kind import kind_of
from harness.nodes.neighbours import declared
from harness.nodes.port import nic
from harness.runtime.context import LabContext
from harness.spray.nic import spraying_hosts, wait_spray
from harness.topology.plan import NodePlan

START_WORKERS = 8


@dataclass
class Progress:
    """Deploy reports each stage's progress here; the CLI draws it, tests ignore it."""

    stage: Callable[[str, int], None] = lambda name, total: None
    advance: Callable[[int], None] = lambda n: None
    converge: Callable[[Convergence], None] = lambda conv: None
    # what the deploy says before it starts: a note a user should weigh (`caution`), or
    # plain information such as the probe schedule the hosts will run
    note: Callable[[str, bool], None] = lambda text, caution: None


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[LabContext, Progress], Convergence | None]
    rolls_back: bool = True  # on failure; Ctrl-C always rolls back


def create_nodes(lab: LabContext, progress: Progress) -> None:
    progress.stage("nodes", len(lab.plan.nodes))
    lab.runtime.create_nodes(lab.plan.nodes)
    progress.advance(len(lab.plan.nodes))


def wire(lab: LabContext, progress: Progress) -> None:
    """Two netlink batches per node: its loopback and the veths it is side A of, then the
    addresses of every end (B ends exist only once all A sides are committed)."""
    batches: dict[str, RtnlBatch] = {}
    try:
        for name in lab.node_names:
            batches[name] = lab.node(name).open_batch()
        progress.stage("links", len(lab.plan.links))
        fds = [queue_veth(batches[link.a.node], lab.plan, link,
                          lab.runtime.netns_path(link.b.node)) for link in lab.plan.links]
        sides_a = Counter(link.a.node for link in lab.plan.links)
        try:
            for name, batch in batches.items():
                batch.commit()
                progress.advance(sides_a[name])
        finally:
            for fd in fds:
                os.close(fd)
        progress.stage("addresses", len(batches))
        for name, batch in batches.items():
            queue_addresses(batch, lab.plan.node(name))
            batch.commit()
            progress.advance(1)
    finally:
        for batch in batches.values():
            batch.sock.close()
    for node in lab.plan.nodes:
        kind_of(lab, node.name).wire(lab, node)
        if node.sysctls:  # the user's, once the interfaces they may name exist
            write_sysctls(lab.runtime.netns_path(node.name), node.sysctls)


def impair_links(lab: LabContext, progress: Progress) -> None:
    """Each impaired link of the plan, on the egress of both of its ends."""
    impaired = [link for link in lab.plan.links if not link.impairment.is_clean]
    if impaired:
        progress.stage("impairments", len(impaired))
    for link in impaired:
        for end in (link.a, link.b):
            impair.apply(lab, end, link.impairment)
        progress.advance(1)


def start_nics(lab: LabContext, progress: Progress) -> None:
    """Host ports that honour PAUSE and drain at their speed, on labs whose switches have a
    buffer (harness/nodes/port/nic.py)."""
    ends = nic.nic_ends(lab.plan)
    if ends:
        progress.stage("host NICs", len(ends))
    for end in ends:
        nic.start(lab, end)
        progress.advance(1)


def start_nodes(lab: LabContext, progress: Progress) -> None:
    """Each node's kind starts what it runs (FRR; a switch's agent; a host's sprayer), as long
    as the host has memory for it (harness/deploy/memory.py)."""
    progress.stage("start", len(lab.plan.nodes))
    if lab.plan.share_memory:
        ksm.start_merging(str(lab.dir))
    room = MemoryRoom(lab.plan, str(lab.dir))

    def start(name: str) -> None:
        room.wait(lab.plan.node(name))
        kind_of(lab, name).start(lab, lab.plan.node(name))
        progress.advance(1)

    with ThreadPoolExecutor(max_workers=START_WORKERS) as pool:
        list(pool.map(start, lab.node_names))


def run_exec(lab: LabContext, progress: Progress) -> None:
    commands = [(n, c) for n in lab.plan.nodes for c in n.exec]
    if commands:
        progress.stage("exec", len(commands))
    for node, command in commands:
        out = lab.runtime.run(node.name, lab.runtime.confine(node.name, ["sh", "-c", command]))
        if out.returncode != 0:
            raise LabError(f"{node.name}: exec {command!r} failed ({out.returncode}): "
                           f"{out.stderr.strip()}")
        progress.advance(1)


def on_every_node(lab: LabContext, act: Callable[[NodePlan], None]) -> None:
    """`act` on each node by the deploy's workers; the first error raised is raised here."""
    with ThreadPoolExecutor(max_workers=START_WORKERS) as pool:
        list(pool.map(act, lab.plan.nodes))


def converge(timeout: float) -> Stage:
    """Sessions and FIBs, then what each kind starts only then (a host's sprayer), each node's
    frr.conf in place of what it booted with (render.py: BFD on the sessions, FRR's own route
    hold), then BFD up on every session and every multi-plane host spraying on all of its
    planes (a plane joins a host's spray set once its BFD session is up and its routes are
    in)."""
    def run(lab: LabContext, progress: Progress) -> Convergence:
        deadline = time.monotonic() + timeout
        progress.stage("converging", len(lab.plan.sessions) + sum(
            len(n) for n in declared(lab).values()))
        try:
            try:
                converged = wait_converged(lab, timeout, progress.converge)
            finally:  # a lab kept for a look runs all it would have run
                on_every_node(lab, lambda node: kind_of(lab, node.name).converged(lab, node))
            on_every_node(lab, lambda node: finish_boot(lab, node))
            wait_bfd_up(lab, timeout=max(1.0, deadline - time.monotonic()))
            if spraying_hosts(lab.plan):
                wait_spray(lab, timeout=max(1.0, deadline - time.monotonic()))
        finally:  # converged or kept for a look: the deploy is over
            if lab.plan.share_memory:
                ksm.merge_slowly()
        return converged
    return Stage("converge", run, rolls_back=False)


def deploy_stages(*, start: bool = True, timeout: float = 120.0) -> list[Stage]:
    """`start=False` wires the lab and runs nothing in it (`deploy --no-frr`)."""
    wiring = [Stage("nodes", create_nodes), Stage("wire", wire),
              Stage("impair", impair_links), Stage("nics", start_nics)]
    if not start:
        return [*wiring, Stage("exec", run_exec)]
    return [*wiring, Stage("start", start_nodes), Stage("exec", run_exec), converge(timeout)]
