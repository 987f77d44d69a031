"""What the docker runtime promises beyond a working lab: a container per node with no network
of docker's (networking disabled: no libnetwork sandbox, no interface but the lab's), only the
listed capabilities, and every process of the lab inside its node's container."""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.core.wait import wait_until
from harness.deploy.lab import Lab
from harness.runtime import docker_engine, images
from harness.runtime.docker import CAPABILITIES, LAB_LABEL, NODE_LABEL
from harness.testing.chaos import labctl
from harness.testing.plugin import RUNTIME
from harness.topology.export import IMAGES_TARBALL, LOAD_SCRIPT
from tests.conftest import TOPOLOGIES
from tests.e2e.conftest import deploy

pytestmark = pytest.mark.skipif(RUNTIME != "docker", reason="the docker runtime's own "
                                "promises; `make test-docker` runs them")
NAME = "e2edock"
# Bit numbers of linux/capability.h, for the names CAPABILITIES lists.
CAP_BITS = {"CHOWN": 0, "DAC_OVERRIDE": 1, "FOWNER": 3, "KILL": 5, "SETGID": 6, "SETUID": 7,
            "NET_BIND_SERVICE": 10, "NET_RAW": 13, "NET_ADMIN": 12, "SYS_ADMIN": 21,
            "SYS_NICE": 23}
# What the kernel puts in every network namespace when a tunnel module is loaded.
KERNEL_FALLBACK = {"tunl0", "sit0", "ip6tnl0", "gre0", "gretap0", "erspan0", "ip_vti0",
                   "ip6_vti0", "ip6gre0"}


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    lab = deploy("sai-fabric.yml", NAME)  # SAI switches (FRR + agent) and FRR hosts
    yield lab
    lab.destroy()


def inspect(lab: Lab, node: str) -> dict:
    return docker_engine.call("GET", f"/containers/{lab.runtime.container(node)}/json")


def test_a_container_per_node_with_networking_disabled(lab: Lab) -> None:
    for node in lab.plan.nodes:
        found = inspect(lab, node.name)
        assert found["Config"]["Labels"][LAB_LABEL] == NAME
        assert found["Config"]["Labels"][NODE_LABEL] == node.name
        assert found["Config"].get("NetworkDisabled") is True
        assert found["NetworkSettings"]["SandboxKey"] == ""  # no libnetwork sandbox
        out = lab.runtime.run(node.name, ["ip", "-o", "link", "show"], check=True)
        names = {line.split(": ")[1].split("@")[0] for line in out.stdout.splitlines()}
        assert names - KERNEL_FALLBACK == {"lo"} | {i.name for i in node.interfaces}, node.name


def test_processes_hold_only_the_listed_capabilities(lab: Lab) -> None:
    allowed = sum(1 << CAP_BITS[c] for c in CAPABILITIES)
    assert set(CAP_BITS) == set(CAPABILITIES)
    seen = 0
    for node in lab.node_names:
        assert inspect(lab, node)["HostConfig"]["CapDrop"] == ["ALL"]
        for pid in lab.runtime.node_processes(node):
            status = Path(f"/proc/{pid}/status").read_text()
            bounding = int(next(line.split()[1] for line in status.splitlines()
                                if line.startswith("CapBnd:")), 16)
            assert bounding & ~allowed == 0, (node, pid, hex(bounding))
            seen += 1
    assert seen >= 4 * len(lab.node_names)  # FRR's daemons at least, on every node


def test_a_finished_command_leaves_no_pid_file(lab: Lab) -> None:
    """The pid file lets terminate() reach the command in the container; once it has ended,
    it goes."""
    node = lab.node_names[0]
    files = lab.runtime.dir / "nodes" / node / "exec"
    before = set(files.glob("*.pid"))
    proc = lab.runtime.popen(node, ["sleep", "0.5"], stdout=subprocess.DEVNULL)
    wait_until(lambda: set(files.glob("*.pid")) - before, 10,
               lambda _: AssertionError("the command wrote no pid file"), every=0.01)
    assert proc.wait(timeout=10) == 0
    assert set(files.glob("*.pid")) == before


def test_every_process_of_the_lab_is_in_its_nodes_container(lab: Lab) -> None:
    """Found by network namespace, so a helper started outside `docker exec` would show."""
    netns = {os.stat(lab.runtime.netns_path(n)).st_ino: n for n in lab.node_names}
    pidns = {n: os.stat(f"/proc/{lab.runtime.init_pid(n)}/ns/pid").st_ino
             for n in lab.node_names}
    in_lab = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            node = netns.get(os.stat(f"/proc/{pid}/ns/net").st_ino)
            if node is None:
                continue
            assert os.stat(f"/proc/{pid}/ns/pid").st_ino == pidns[node], (node, pid)
        except OSError:  # gone meanwhile, or the VM's own init (not readable here)
            continue
        in_lab += 1
    agents = [n.name for n in lab.plan.nodes if n.kind.value == "sai"]
    assert in_lab >= 5 * len(agents)  # each switch: its four FRR daemons and its agent


def test_export_writes_the_images_the_lab_runs_and_a_script_that_loads_them(
        tmp_path: Path) -> None:
    """The images are built here with no registry: the export carries them as one tarball
    (docker save) that its script loads into docker, under the names the file gives."""
    folder = tmp_path / "exported"
    out = labctl("export", "-t", str(TOPOLOGIES / "clos.yml"), "--images", "-o", str(folder))
    assert out.returncode == 0, out.stderr
    built = {images.resolve(f"{images.REPOSITORY}/{kind}") for kind in images.IMAGES}
    named = {line.split("image: ", 1)[1].strip() for line in
             (folder / "clos.clab.yml").read_text().splitlines() if "image: " in line}
    with tarfile.open(folder / IMAGES_TARBALL) as tarball:
        manifest = json.load(tarball.extractfile("manifest.json"))
    assert named == {tag for image in manifest for tag in image["RepoTags"]} == built
    script = folder / LOAD_SCRIPT
    assert os.access(script, os.X_OK)
    loaded = subprocess.run([str(script)], capture_output=True, text=True, timeout=600)
    assert loaded.returncode == 0, loaded.stderr
    assert all(f"Loaded image: {image}" in loaded.stdout for image in built), loaded.stdout
