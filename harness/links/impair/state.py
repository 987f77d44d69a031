"""What runs on each impaired endpoint, kept in the lab dir so show, clear and destroy know it.

One JSON file per endpoint (`impair/<node>.<iface>.json`), written after the impairment is in
place and removed after it is gone, so the file never claims more than what is running.
"""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from harness.linux.files import replace_file
from harness.topology.plan import Endpoint, Impairment

STATE_DIR = "impair"
_SUN_PATH_MAX = 107  # sockaddr_un.sun_path, minus the terminating NUL


class LinkState(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    endpoint: Endpoint
    backend: str  # "netem" | "userspace"
    impairment: Impairment
    pid: int | None = None  # the userspace forwarder
    start_time: int | None = None
    tap: str | None = None
    control: str | None = None  # its control socket


def state_dir(lab_dir: Path) -> Path:
    return lab_dir / STATE_DIR


def _stem(endpoint: Endpoint) -> str:
    return f"{endpoint.node}.{endpoint.iface}"  # neither part may contain a dot


def state_path(lab_dir: Path, endpoint: Endpoint) -> Path:
    return state_dir(lab_dir) / f"{_stem(endpoint)}.json"


def control_path(lab_dir: Path, endpoint: Endpoint) -> Path:
    """The forwarder's socket; a hashed name when the readable one does not fit sun_path."""
    path = state_dir(lab_dir) / f"{_stem(endpoint)}.sock"
    if len(str(path)) > _SUN_PATH_MAX:
        path = path.with_name(hashlib.sha1(_stem(endpoint).encode()).hexdigest()[:16] + ".sock")
    return path


def load(lab_dir: Path, endpoint: Endpoint) -> LinkState | None:
    with contextlib.suppress(FileNotFoundError, ValueError):
        return LinkState.model_validate_json(state_path(lab_dir, endpoint).read_text())
    return None


def load_all(lab_dir: Path) -> list[LinkState]:
    states = []
    for path in sorted(state_dir(lab_dir).glob("*.json")):
        with contextlib.suppress(FileNotFoundError, ValueError):
            states.append(LinkState.model_validate_json(path.read_text()))
    return states


def save(lab_dir: Path, state: LinkState) -> None:
    path = state_path(lab_dir, state.endpoint)
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_file(path, state.model_dump_json(indent=1))  # readers never see half a file


def remove(lab_dir: Path, endpoint: Endpoint) -> None:
    state_path(lab_dir, endpoint).unlink(missing_ok=True)
