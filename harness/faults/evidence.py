"""A failed lab's evidence, archived before the lab is destroyed.

What a person debugging the failure the next morning needs and cannot get once the namespaces
are gone: the lab's files (plan, journal, each node's logs and configs), each router's FRR
state as JSON (BGP, OSPF, BFD and routes, from the daemons it runs), each SAI switch's
objects, counters and configuration state, each node's kernel addresses, routes, neighbours
and packet filters, and the faults in place. Collecting never raises: a part that cannot be
read (a crashed daemon) is recorded as the error it gave.
"""

from __future__ import annotations

import json
import shutil
import stat
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from harness.faults import records
from harness.nodes.kind import kind_of
from harness.runtime.context import LabContext

FILE_TAIL_BYTES = 4 << 20  # a log larger than this keeps its end: where the failure is
KERNEL = {"addresses": ("ip", "-j", "address"), "links": ("ip", "-j", "-s", "link"),
          "routes4": ("ip", "-j", "-4", "route", "show", "table", "all"),
          "routes6": ("ip", "-j", "-6", "route", "show", "table", "all"),
          "neighbours": ("ip", "-j", "neighbour"), "nftables": ("nft", "list", "ruleset")}
READ_TIMEOUT_S = 10.0


def _read(what: Callable[[], Any]) -> Any:
    try:
        return what()
    except Exception as exc:  # evidence of a broken lab: the error is the finding
        return {"error": f"{type(exc).__name__}: {exc}"}


def _command(lab: LabContext, node: str, argv: tuple[str, ...]) -> Any:
    out = lab.node(node).cmd(*argv, timeout=READ_TIMEOUT_S)
    if out.returncode:
        raise RuntimeError(f"{' '.join(argv)}: exit {out.returncode}: {out.stderr.strip()}")
    return json.loads(out.stdout) if "-j" in argv else out.stdout


def node_state(lab: LabContext, name: str) -> dict[str, Any]:
    plan = lab.plan.node(name)
    state: dict[str, Any] = {"kernel": {key: _read(lambda a=argv: _command(lab, name, a))
                                        for key, argv in KERNEL.items()}}
    for section, readers in kind_of(lab, name).evidence(lab, plan).items():
        state[section] = {key: _read(read) for key, read in readers.items()}
    return state


def _copy_files(source: Path, dest: Path) -> None:
    """Regular files only (no sockets, FIFOs); a large one keeps its last FILE_TAIL_BYTES."""
    for path in sorted(source.rglob("*")):
        try:
            info = path.lstat()
        except OSError:
            continue  # gone meanwhile: a lab still running writes and removes files
        if not stat.S_ISREG(info.st_mode):
            continue
        target = dest / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            if info.st_size <= FILE_TAIL_BYTES:
                shutil.copyfile(path, target)
            else:
                with path.open("rb") as src:
                    src.seek(-FILE_TAIL_BYTES, 2)
                    target.write_bytes(src.read())
        except OSError:
            continue


def archive(lab: LabContext, dest: Path) -> Path:
    """Everything above, into `dest/` (created): files/, nodes/NODE.json, faults.json."""
    dest.mkdir(parents=True, exist_ok=True)
    _copy_files(lab.dir, dest / "files")
    (dest / "nodes").mkdir(exist_ok=True)
    with ThreadPoolExecutor(max_workers=4) as pool:
        states = pool.map(lambda name: (name, node_state(lab, name)), lab.node_names)
        for name, state in states:
            (dest / "nodes" / f"{name}.json").write_text(json.dumps(state, indent=1))
    faults = [r.model_dump(mode="json") for r in records.load_all(lab.dir)]
    (dest / "faults.json").write_text(json.dumps(faults, indent=1))
    return dest
