"""The Engine API client and the docker runtime against a fake dockerd on a unix socket: the
requests made (a container with networking disabled, created, started, looked up) and the
errors given."""

from __future__ import annotations

import json
import socketserver
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from harness.core.errors import LabError
from harness.core.paths import lab_dir
from harness.linux.journal import Journal
from harness.runtime import docker_engine
from harness.runtime.docker import CAPABILITIES, LAB_LABEL, NODE_LABEL, DockerRuntime
from harness.topology.pipeline import plan_from_file


class FakeDockerd(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """Answers from `routes` ((method, path without query) -> (status, body)); logs requests."""

    daemon_threads = True

    def __init__(self, path: str, routes: dict[tuple[str, str], tuple[int, object]]) -> None:
        self.routes = routes
        self.requests: list[tuple[str, str, object]] = []
        super().__init__(path, Handler)


class Handler(BaseHTTPRequestHandler):
    server: FakeDockerd

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        self.server.requests.append((self.command, self.path, body))
        status, answer = self.server.routes.get((self.command, self.path.split("?")[0]),
                                                (404, {"message": "page not found"}))
        data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _answer

    def address_string(self) -> str:
        return "fake"

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def dockerd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeDockerd]:
    """Bound by a relative name: tmp_path may be longer than a unix socket's 108 bytes."""
    monkeypatch.chdir(tmp_path)
    server = FakeDockerd("docker.sock", {})
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("DOCKER_HOST", "unix://docker.sock")
    yield server
    server.shutdown()
    server.server_close()


def test_run_container_creates_without_networking_starts_and_returns_the_pid(
        dockerd: FakeDockerd) -> None:
    dockerd.routes.update({("POST", "/containers/create"): (201, {"Id": "abc"}),
                           ("POST", "/containers/abc/start"): (204, None),
                           ("GET", "/containers/abc/json"): (200, {"State": {"Pid": 4242}})})
    pid = docker_engine.run_container("fl.lab.r1", "fabric-lab/switch:x",
                                      {"Hostname": "r1", "HostConfig": {"Init": True}})
    assert pid == 4242
    (method, path, body), start, inspect = dockerd.requests
    assert (method, path) == ("POST", "/containers/create?name=fl.lab.r1")
    assert body == {"Hostname": "r1", "HostConfig": {"Init": True},
                    "Image": "fabric-lab/switch:x", "NetworkDisabled": True}
    assert start[:2] == ("POST", "/containers/abc/start")
    assert inspect[:2] == ("GET", "/containers/abc/json")


def test_a_refusal_carries_dockerds_message(dockerd: FakeDockerd) -> None:
    dockerd.routes[("POST", "/containers/create")] = (
        409, {"message": 'Conflict. The container name "/fl.lab.r1" is already in use'})
    with pytest.raises(LabError, match=r"refused POST /containers/create: Conflict.*in use"):
        docker_engine.run_container("fl.lab.r1", "img", {})
    assert len(dockerd.requests) == 1  # nothing started after a failed create


def test_a_plain_text_error_page_is_the_message(dockerd: FakeDockerd) -> None:
    dockerd.routes[("GET", "/version")] = (404, b"404 page not found\n")
    with pytest.raises(LabError, match=r"refused GET /version: 404 page not found$"):
        docker_engine.version()


def test_image_labels_keeps_the_repositorys_tags_only(dockerd: FakeDockerd) -> None:
    dockerd.routes[("GET", "/images/json")] = (200, [
        {"RepoTags": ["fabric-lab/switch:a", "other/switch:a"], "Labels": {"k": "1"}},
        {"RepoTags": None, "Labels": None},
        {"RepoTags": ["fabric-lab/switch:b"], "Labels": None}])
    assert docker_engine.image_labels("fabric-lab/switch") == {"fabric-lab/switch:a": {"k": "1"},
                                                               "fabric-lab/switch:b": {}}
    _, path, _ = dockerd.requests[0]
    query = parse_qs(urlsplit(path).query)
    assert json.loads(query["filters"][0]) == {"reference": ["fabric-lab/switch:*"]}


def test_container_labels_asks_for_every_container_with_the_label(
        dockerd: FakeDockerd) -> None:
    dockerd.routes[("GET", "/containers/json")] = (200, [{"Labels": {"fabric-lab.lab": "a"}}])
    assert docker_engine.container_labels("fabric-lab.lab") == [{"fabric-lab.lab": "a"}]
    query = parse_qs(urlsplit(dockerd.requests[0][1]).query)
    assert query["all"] == ["1"]  # stopped containers too: destroy must find them
    assert json.loads(query["filters"][0]) == {"label": ["fabric-lab.lab"]}


def test_no_dockerd_says_how_to_start_one(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/absent.sock")
    with pytest.raises(LabError, match=r"does not answer on .*absent.sock.*make docker"):
        docker_engine.version()


def test_a_remote_docker_host_is_refused_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "tcp://10.0.0.1:2375")
    with pytest.raises(LabError, match=r"DOCKER_HOST=tcp://10.0.0.1:2375.*unset DOCKER_HOST"):
        docker_engine.version()


def test_the_runtime_asks_for_each_node_as_containerlab_would_run_it(
        dockerd: FakeDockerd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file's binds and env, the lab directory, the labels `destroy` finds the containers
    by, capabilities dropped to the listed ones: all in the one create request per node."""
    monkeypatch.setenv("FABRIC_LAB_ROOT", str(tmp_path / "labs"))
    (tmp_path / "data").mkdir()
    (tmp_path / "lab.yml").write_text("""
name: eng
topology:
  nodes:
    a: {kind: linux, image: alpine, env: {MODE: test}, binds: ["data:/data:ro"]}
""")
    [node] = plan_from_file(tmp_path / "lab.yml").nodes
    node = node.model_copy(update={"image": "fabric-lab/host:x"})
    dockerd.routes.update({("POST", "/containers/create"): (201, {"Id": "c1"}),
                           ("POST", "/containers/c1/start"): (204, None),
                           ("GET", "/containers/c1/json"): (200, {"State": {"Pid": 77}})})
    runtime = DockerRuntime("eng", Journal(tmp_path / "journal"))
    runtime.create_nodes([node])
    assert runtime.init_pid("a") == 77 and len(dockerd.requests) == 3  # no second lookup
    _, path, body = dockerd.requests[0]
    assert path == "/containers/create?name=fl.eng.a"
    assert body["Env"] == ["MODE=test"] and body["Hostname"] == "a"
    assert body["Labels"] == {LAB_LABEL: "eng", NODE_LABEL: "a"}
    host = body["HostConfig"]
    assert host["Binds"] == [f"{lab_dir('eng')}:{lab_dir('eng')}", f"{tmp_path}/data:/data:ro"]
    assert host["CapDrop"] == ["ALL"] and set(host["CapAdd"]) == set(CAPABILITIES)
    assert host["Init"] and body["NetworkDisabled"]
    assert "fl.eng.a" in (tmp_path / "journal").read_text()  # journalled before it was asked
