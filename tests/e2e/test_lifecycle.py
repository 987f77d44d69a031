"""Deploy and destroy under stress: bad files, SIGKILL, Ctrl-C, two labs, the host untouched."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from harness.core.errors import LabError
from harness.core.paths import lab_dir
from harness.core.wait import wait_until
from harness.deploy.lab import Lab
from harness.deploy.stages import Progress
from harness.linux import ksm
from harness.runtime import runtime_class
from harness.testing import chaos
from harness.testing.chaos import LABCTL, labctl
from harness.testing.hoststate import differences, snapshot
from harness.testing.plugin import RUNTIME
from harness.topology.pipeline import plan_from_file
from tests.conftest import REPO, TOPOLOGIES
from tests.e2e.conftest import deploy, leftovers

pytestmark = pytest.mark.e2e


def test_rejected_file_creates_nothing() -> None:
    bad = REPO / "tests" / "corpus" / "bad" / "missing-node.yml"
    out = labctl("deploy", str(bad))
    assert out.returncode == 2
    assert f"{bad}:10: topology.links[0].endpoints[1]: link to unknown node 'leaf9'" in out.stderr
    assert "nothing was created" in out.stderr
    assert leftovers("bad") == []


def test_destroy_a_path_removes_nothing_and_a_file_means_its_lab(tmp_path: Path) -> None:
    victim = tmp_path / "keep"
    victim.mkdir()
    (victim / "precious").write_text("x")
    for target in (str(victim), str(tmp_path), "..", "."):
        out = labctl("destroy", target)
        assert out.returncode == 2 and "neither a lab name" in out.stderr, out
    assert (victim / "precious").exists()
    topology = tmp_path / "mine.yml"
    topology.write_text((TOPOLOGIES / "pair.yml").read_text().replace("name: pair",
                                                                     "name: e2efile"))
    for args in (["destroy", str(topology)], ["destroy", "-t", str(topology)]):
        assert labctl("deploy", str(topology), "--no-frr").returncode == 0
        out = labctl(*args)
        assert out.returncode == 0 and "destroyed e2efile" in out.stdout, out
        assert leftovers("e2efile") == []


def test_destroy_cleanup_removes_the_saved_configs_of_a_lab_given_by_folder(
        tmp_path: Path) -> None:
    """containerlab's habits: a folder for its topology file, --cleanup for the lab's files."""
    folder = tmp_path / "mylab"
    folder.mkdir()
    (folder / "mylab.clab.yml").write_text(
        (TOPOLOGIES / "pair.yml").read_text().replace("name: pair", "name: e2ecleanup"))
    assert labctl("deploy", str(folder), "--no-frr").returncode == 0
    saved = folder / "clab-e2ecleanup" / "r1" / "frr.conf"
    saved.parent.mkdir(parents=True)
    saved.write_text("hostname r1\n")  # as `labctl save` writes it
    out = labctl("destroy", "--cleanup", str(folder))
    assert out.returncode == 0 and "destroyed e2ecleanup" in out.stdout, out
    assert not saved.parent.parent.exists() and leftovers("e2ecleanup") == []


def test_a_directory_under_the_labs_root_that_is_no_lab_is_left_alone(tmp_path: Path) -> None:
    (tmp_path / "notalab").mkdir()
    (tmp_path / "notalab" / "data").write_text("x")
    out = subprocess.run([*LABCTL, "destroy", "notalab"], capture_output=True, text=True,
                         env={**os.environ, "FABRIC_LAB_ROOT": str(tmp_path)}, timeout=60)
    assert out.returncode == 2 and "not a fabric-lab lab" in out.stderr, out
    assert (tmp_path / "notalab" / "data").exists()


def test_unknown_lab_and_node_errors_name_the_fix() -> None:
    out = labctl("inspect", "nosuchlab")
    assert out.returncode == 2 and "no lab named 'nosuchlab'" in out.stderr


def _start_deploy(name: str) -> subprocess.Popen:
    return subprocess.Popen([*LABCTL, "deploy", str(TOPOLOGIES / "clos.yml"), "--name", name],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


CHAOS_SEED = int(os.environ.get("FABRIC_LAB_CHAOS_SEED", "1"))
CHAOS_TRIALS = 8


CANNOT_SHARE = runtime_class(RUNTIME).cannot_share_memory or ksm.unsupported()
SHARING = pytest.param("sai-fabric.yml", "on", marks=pytest.mark.skipif(
    bool(CANNOT_SHARE), reason=f"no lab here can share its memory: {CANNOT_SHARE}"))


@pytest.mark.parametrize(("topology", "share_memory"),
                         [("clos.yml", "auto"), ("sai-fabric.yml", "auto"), SHARING])
def test_sigkill_at_random_points_then_destroy_leaves_nothing(topology: str,
                                                              share_memory: str) -> None:
    """Seeded; `bench/chaos.py` runs the long version. A lab that shares memory turns KSM on
    and raises ksmd's priority: destroy after any kill must put both back."""
    done = chaos.run(chaos.Chaos(TOPOLOGIES / topology, "e2echaos", RUNTIME, share_memory,
                                 CHAOS_SEED), CHAOS_TRIALS)
    print(done.summary())
    assert done.clean, done.summary()
    assert max(t.found for t in done.trials) > 0  # some kills landed while it was being built


def test_ctrl_c_during_deploy_rolls_back_by_itself() -> None:
    proc = _start_deploy("e2eintr")
    wait_until(lambda: list(lab_dir("e2eintr").glob("nodes/*/run/zebra.pid")), 20,
               lambda _: AssertionError(f"no zebra started (deploy exit {proc.poll()})"),
               every=0.05, alive=lambda: proc.poll() is None)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130, proc.stderr.read()
    assert leftovers("e2eintr") == []


def test_ctrl_c_while_converging_rolls_back_too() -> None:
    """Only a convergence timeout keeps the lab (to look at); an interrupt removes it."""
    def interrupt_when_converging(stage: str, _total: int) -> None:
        if stage == "converging":
            raise KeyboardInterrupt

    lab = Lab(plan_from_file(TOPOLOGIES / "pair.yml", "e2eintc"))
    with pytest.raises(KeyboardInterrupt):
        lab.deploy(Progress(stage=interrupt_when_converging))
    assert leftovers("e2eintc") == []


def test_two_labs_side_by_side_and_the_host_is_untouched() -> None:
    before = snapshot()
    with ThreadPoolExecutor(2) as pool:
        labs: list[Lab] = list(pool.map(lambda n: deploy("clos.yml", n), ["e2eleft", "e2eright"]))
    left, right = labs
    try:
        # Same addresses in both labs, yet each lab only sees itself.
        assert left.plan.node("host1").loopback4 == right.plan.node("host1").loopback4
        assert left.node("host1").netlink().get_links() and left.runtime.netns_path("host1") != \
            right.runtime.netns_path("host1")
        left.destroy()
        target = right.plan.node("host4").loopback4
        out = right.node("host1").cmd("ping", "-c", "2", "-i", "0.2", "-W", "2", target)
        assert out.returncode == 0, out.stdout
        assert json.loads(labctl("inspect", "e2eright", "--json").stdout)["lab"] == "e2eright"
    finally:
        left.destroy()
        right.destroy()
    assert leftovers("e2eleft") == [] and leftovers("e2eright") == []
    assert differences(before, snapshot()) == []


def test_convergence_timeout_names_what_is_missing() -> None:
    lab = Lab(plan_from_file(TOPOLOGIES / "clos.yml", "e2eslow"))
    try:
        with pytest.raises(LabError) as caught:
            lab.deploy(timeout=0)
        text = str(caught.value)
        assert "did not converge within 0s" in text
        assert re.search(r"session \w+ -> \w+ \(ipv[46] [0-9a-f.:]+\) not Established", text) \
            or "FIB lacks" in text
        assert lab.dir.exists()  # built but not converged: kept for inspection
    finally:
        lab.destroy()
    assert leftovers("e2eslow") == []


def test_doctor_reports_every_probe_with_its_evidence() -> None:
    out = labctl("doctor", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    names = {f["name"] for f in report["features"]}
    assert {"netem", "vrf", "openvswitch", "mpls", "seg6", "seg6local", "fq"} <= names
    for f in report["features"]:
        assert isinstance(f["available"], bool) and f["detail"]
        assert (f["detail"] == "works") == f["available"]
    assert any(t["name"] == "frr" and t["path"] for t in report["tools"])
    # a kernel with KSM since 6.4 has the merge flag, and recent ones keep it across exec
    assert report["memory_sharing"].startswith("yes") == (ksm.KSM / "run").exists(), \
        report["memory_sharing"]
