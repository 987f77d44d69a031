"""Start a lab's recorder (harness/instruments/recorder.py) once the lab has converged: what it
watches comes in its config, worked out here from the plan and the runtime (each node's
namespace, ports, bgpd log and BFD feed as the host reaches them), so the process needs no lab.

It starts after convergence, not before: a 500-node lab's deploy is a million route changes
the recorder would count for nothing, and the deploy's own event says when it converged.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core.errors import LabError
from harness.core.events import events_dir
from harness.core.wait import wait_until
from harness.instruments.recorder import SOURCE
from harness.nodes.frr import CONFIG_LOG, bfd_news, frr_of

if TYPE_CHECKING:
    from harness.runtime.context import LabContext

CONFIG_FILE = "recorder.json"
READY_S, READY_PER_NODE_S = 10.0, 0.05
LOG_FILE = "recorder.log"


def watched(lab: LabContext) -> list[dict[str, Any]]:
    nodes = []
    for node in lab.plan.nodes:
        entry: dict[str, Any] = {
            "name": node.name, "netns": lab.runtime.netns_path(node.name),
            "ports": [i.name for i in node.interfaces], "bfd": {},
            "peers": {s.peer_ip: s.peer for s in lab.plan.sessions_of(node.name)}}
        if node.runs_frr:
            frr = frr_of(lab, node.name)
            if "bgpd" in frr.daemons:  # a user's config may log elsewhere, or to the second
                entry["bgp_log"] = str(frr.log_dir / (
                    "bgpd.log" if node.user_configured else CONFIG_LOG))
            if "bfdd" in frr.daemons:
                entry["bfd"] = {kind: str(lab.runtime.host_path(node.name, Path(path)))
                                for kind, path in bfd_news(lab, node.name).items()}
        nodes.append(entry)
    return nodes


def start_recorder(lab: LabContext) -> int:
    """The recorder, detached and journaled (destroy ends it); its pid once it listens on
    every node (it says so in the record first), so a fault injected at once is seen."""
    config = lab.dir / CONFIG_FILE
    config.write_text(json.dumps({"lab_dir": str(lab.dir), "nodes": watched(lab)}))
    with open(lab.dir / LOG_FILE, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "harness.instruments.recorder",
                                 str(config)], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    lab.journal.process(proc.pid, "recorder")
    first = events_dir(lab.dir) / f"{SOURCE}.jsonl"
    wait_until(first.exists, READY_S + READY_PER_NODE_S * len(lab.plan.nodes),
               lambda _: LabError(f"the lab's recorder did not start; see {lab.dir / LOG_FILE}"),
               alive=lambda: proc.poll() is None, every=0.05)
    return proc.pid
