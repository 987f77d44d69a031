"""Deploy and destroy under stress: bad files, SIGKILL, Ctrl-C, two labs, the host untouched."""

from __future__ import annotations

import json
import random
import re
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.errors import LabError
from harness.lab import Lab, Progress
from harness.paths import lab_dir
from harness.topology.augment import augment
from harness.topology.loader import load_file
from tests.conftest import REPO, TOPOLOGIES
from tests.e2e.conftest import LABCTL, deploy, labctl, leftovers

pytestmark = pytest.mark.e2e


def host_state() -> dict[str, str]:
    """The host's own network configuration, minus counters and address lifetimes."""
    commands = {"links": ["ip", "-j", "link"], "addrs": ["ip", "-j", "addr"],
                "routes4": ["ip", "-j", "-4", "route", "show", "table", "all"],
                "routes6": ["ip", "-j", "-6", "route", "show", "table", "all"],
                "rules": ["ip", "-j", "rule"], "nft": ["nft", "list", "ruleset"],
                "iptables": ["iptables-save"], "ip6tables": ["ip6tables-save"],
                "netns": ["ip", "netns", "list"]}
    state = {}
    for key, argv in commands.items():
        text = subprocess.run(argv, capture_output=True, text=True).stdout
        text = re.sub(r'"(valid|preferred)_life_time":\d+', "", text)
        state[key] = re.sub(r"^#.*$", "", text, flags=re.M)  # iptables-save timestamps
    return state


def test_rejected_file_creates_nothing() -> None:
    bad = REPO / "tests" / "corpus" / "bad" / "missing-node.yml"
    out = labctl("deploy", str(bad))
    assert out.returncode == 2
    assert f"{bad}:10: topology.links[0].endpoints[1]: link to unknown node 'leaf9'" in out.stderr
    assert "nothing was created" in out.stderr
    assert leftovers("bad") == []


def test_unknown_lab_and_node_errors_name_the_fix() -> None:
    out = labctl("inspect", "nosuchlab")
    assert out.returncode == 2 and "no lab named 'nosuchlab'" in out.stderr


def _start_deploy(name: str) -> subprocess.Popen:
    return subprocess.Popen([*LABCTL, "deploy", str(TOPOLOGIES / "clos.yml"), "--name", name],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sigkill_during_deploy_then_destroy_leaves_nothing(seed: int) -> None:
    name = f"e2ekill{seed}"
    delay = random.Random(seed).uniform(0.3, 3.0)
    proc = _start_deploy(name)
    time.sleep(delay)
    proc.kill()
    proc.wait()
    found_before = leftovers(name)
    out = labctl("destroy", name)
    assert out.returncode == 0, out.stderr
    assert leftovers(name) == [], f"killed after {delay:.2f}s; had {found_before}"


def test_ctrl_c_during_deploy_rolls_back_by_itself() -> None:
    proc = _start_deploy("e2eintr")
    deadline = time.monotonic() + 20
    while not list(lab_dir("e2eintr").glob("nodes/*/run/zebra.pid")):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130, proc.stderr.read()
    assert leftovers("e2eintr") == []


def test_ctrl_c_while_converging_rolls_back_too() -> None:
    """Only a convergence timeout keeps the lab (to look at); an interrupt removes it."""
    def interrupt_when_converging(stage: str, _total: int) -> None:
        if stage == "converging":
            raise KeyboardInterrupt

    lab = Lab(augment(load_file(TOPOLOGIES / "pair.yml"), "e2eintc"))
    with pytest.raises(KeyboardInterrupt):
        lab.deploy(Progress(stage=interrupt_when_converging))
    assert leftovers("e2eintc") == []


def test_two_labs_side_by_side_and_the_host_is_untouched() -> None:
    before = host_state()
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
    after = host_state()
    for key in before:
        assert after[key] == before[key], f"host {key} changed"


def test_convergence_timeout_names_what_is_missing() -> None:
    lab = Lab(augment(load_file(TOPOLOGIES / "clos.yml"), "e2eslow"))
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
