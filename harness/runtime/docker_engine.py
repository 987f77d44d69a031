"""dockerd's Engine API over its unix socket, for what the docker CLI cannot do or does slowly.

A lab node's container is created with networking disabled (`NetworkDisabled`, which the CLI
does not offer): runc gives it a fresh, empty network namespace and dockerd's libnetwork stays
out. `docker run --network none` still builds a libnetwork sandbox and has runc call dockerd
back through a prestart hook (`libnetwork-setkey`, a re-exec of the whole dockerd binary) for
every container: half of what starting one cost here. Image lookups go through the API too,
one request instead of a CLI process per question.

Paths carry no API version: dockerd then serves its own, and the fields used here have been
stable since Engine API 1.25.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from harness.core.errors import LabError

DEFAULT_SOCKET = "/var/run/docker.sock"
SAVE_CHUNK = 1 << 20


def socket_path() -> str:
    """dockerd's socket: DOCKER_HOST when it names a unix socket, as the CLI reads it."""
    host = os.environ.get("DOCKER_HOST", "")
    if not host:
        return DEFAULT_SOCKET
    if not host.startswith("unix://"):
        raise LabError(f"DOCKER_HOST={host}: the docker runtime talks to a local dockerd over "
                       "its unix socket; unset DOCKER_HOST or set it to unix:///path/docker.sock")
    return host.removeprefix("unix://")


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("docker", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


@contextmanager
def _response(method: str, path: str, body: dict[str, Any] | None,
              timeout: float) -> Iterator[http.client.HTTPResponse]:
    """One API request's response, open while the caller reads it. An OSError raised in the
    caller's block is taken for dockerd's socket failing: a caller doing other I/O there
    (save_images, its file) says its own errors as LabError."""
    where = socket_path()
    connection = _UnixConnection(where, timeout)
    try:
        connection.request(method, path, None if body is None else json.dumps(body),
                           {"Content-Type": "application/json"})
        yield connection.getresponse()
    except (OSError, http.client.HTTPException) as exc:
        raise LabError(f"dockerd does not answer on {where} ({exc}): `make docker` starts "
                       "one") from None
    finally:
        connection.close()


def _decode(data: bytes) -> Any:
    try:
        return json.loads(data) if data.strip() else None
    except ValueError:  # an error page in plain text (a route this dockerd does not know)
        return data.decode(errors="replace").strip()


def _refusal(method: str, path: str, answer: Any) -> LabError:
    message = answer.get("message", answer) if isinstance(answer, dict) else answer
    return LabError(f"dockerd refused {method} {path.split('?')[0]}: {message}")


def call(method: str, path: str, body: dict[str, Any] | None = None, *,
         timeout: float = 120) -> Any:
    """One API request; its decoded JSON answer, or a LabError with dockerd's message."""
    with _response(method, path, body, timeout) as response:
        answer = _decode(response.read())
    if response.status >= 400:
        raise _refusal(method, path, answer)
    return answer


def save_images(references: list[str], out: Path, *, timeout: float = 600) -> None:
    """`docker save`: the images, with their tags, as one tarball at `out` (streamed). A file
    that cannot be written is said as such, not as dockerd not answering."""
    path = "/images/get?" + "&".join(f"names={quote(r, safe='')}" for r in references)
    with _response("GET", path, None, timeout) as response:
        if response.status >= 400:
            raise _refusal("GET", path, _decode(response.read()))
        try:
            tarball = out.open("wb")
        except OSError as exc:
            raise LabError(f"cannot write the images to {out}: {exc}") from None
        with tarball:
            while chunk := response.read(SAVE_CHUNK):
                try:
                    tarball.write(chunk)
                except OSError as exc:
                    raise LabError(f"cannot write the images to {out}: {exc}") from None


def version() -> str:
    return call("GET", "/version", timeout=10)["Version"]


def run_container(name: str, image: str, config: dict[str, Any]) -> int:
    """Create and start `name` from `image` with networking disabled; the host pid of its
    init. `config` is the rest of the container's create body (HostConfig, Labels...)."""
    body = {**config, "Image": image, "NetworkDisabled": True}
    created = call("POST", f"/containers/create?name={quote(name)}", body)
    call("POST", f"/containers/{created['Id']}/start")
    return init_pid(created["Id"])


def exec_detached(container: str, argv: list[str]) -> None:
    """Start `argv` in a running container and return at once, as `docker exec --detach`
    does, without a CLI process per command: measured here, 60 ms of host CPU per exec
    against 75-87 through the CLI."""
    created = call("POST", f"/containers/{quote(container)}/exec", {"Cmd": argv})
    call("POST", f"/exec/{created['Id']}/start", {"Detach": True})


def init_pid(container: str) -> int:
    """Host pid of a container's init (0 when it is not running), by name or id."""
    return call("GET", f"/containers/{quote(container)}/json", timeout=30)["State"]["Pid"]


def container_labels(label: str) -> list[dict[str, str]]:
    """The labels of every container, running or not, that has `label` (key or key=value)."""
    found = call("GET", f"/containers/json?all=1&filters={_filters(label=[label])}", timeout=30)
    return [container["Labels"] for container in found]


def image_labels(repository: str) -> dict[str, dict[str, str]]:
    """'repository:tag' -> labels, of every local image of `repository`."""
    found = {}
    for image in call("GET", f"/images/json?filters={_filters(reference=[f'{repository}:*'])}"):
        for tag in image.get("RepoTags") or []:
            if tag.startswith(f"{repository}:"):
                found[tag] = image.get("Labels") or {}
    return found


def _filters(**filters: list[str]) -> str:
    """A list request's `filters` parameter: JSON, URL-quoted."""
    return quote(json.dumps(filters))
