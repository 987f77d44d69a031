"""FRR's start script (one command in the node) run by sh against fake daemons, chown and
vtysh: the order, the wait for zebra's socket, and what each failure says."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from harness.core.errors import LabError
from harness.linux.journal import Journal
from harness.nodes import frr as frr_module
from harness.nodes.frr import Frr
from harness.runtime.node import Node
from harness.topology.pipeline import plan_from_file
from tests.conftest import TOPOLOGIES

FAKE_DAEMON = """#!/bin/sh
name=$(basename "$0")
while [ $# -gt 0 ]; do
  case "$1" in --vty_socket) run="$2"; shift ;; -i) pidfile="$2"; shift ;; esac
  shift
done
state=zserv-down; [ -e "$run/zserv.api" ] && state=zserv-up
echo "$name $state" >> "$FAKE_LOG"
if [ "$name" = "$FAKE_FAIL" ]; then echo "$name: bad option" >&2; exit 1; fi
echo $$ > "$pidfile"
[ "$name" = zebra ] && sleep 0.05 && : > "$run/zserv.api"
: > "$run/$name.vty"
"""
FAKE_VTYSH = """#!/bin/sh
echo "vtysh $*" >> "$FAKE_LOG"
if [ "${FAKE_VTYSH_RC:-0}" != 0 ]; then echo "line 2: % Unknown command: frobnicate"; fi
exit "${FAKE_VTYSH_RC:-0}"
"""


class LocalRuntime:
    """Runs a node's commands here, with the fakes first on PATH."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def run(self, node: str, argv: Sequence[str], *, timeout: float | None = 60,
            check: bool = False, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                              check=check, env=self.env)

    def host_pid(self, node: str, pid: int) -> int | None:
        return pid


def executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def frr(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Frr:
    sbin, bin_ = tmp_path / "sbin", tmp_path / "bin"
    sbin.mkdir(), bin_.mkdir()
    for daemon in frr_module.DAEMONS:
        executable(sbin / daemon, FAKE_DAEMON)
    executable(bin_ / "vtysh", FAKE_VTYSH)
    executable(bin_ / "chown", "#!/bin/sh\nexit 0\n")  # the frr user may not exist here
    monkeypatch.setattr(frr_module, "FRR_SBIN", sbin)
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}",
           "FAKE_LOG": str(tmp_path / "calls")}
    node = Node(plan_from_file(TOPOLOGIES / "pair.yml").node("r1"),
                LocalRuntime(env))  # type: ignore[arg-type]
    frr = Frr(node, tmp_path / "r1", "fl.test.r1")
    frr.prepare("router bgp 65001\n")
    return frr


def calls(frr: Frr) -> list[str]:
    return (frr.workdir.parent / "calls").read_text().splitlines()


def test_zebra_first_the_others_once_its_socket_is_there_then_vtysh(frr: Frr) -> None:
    frr.start(Journal(frr.workdir / "journal"))
    daemons, vtysh = calls(frr)[:-1], calls(frr)[-1]
    assert daemons == ["zebra zserv-down", "bgpd zserv-up", "staticd zserv-up", "bfdd zserv-up"]
    assert vtysh.startswith("vtysh --vty_socket") and vtysh.endswith(f"-f {frr.config_file}")
    assert frr.refused() == []


def test_the_configs_router_ids_go_first_and_only_the_whole_configs_output_counts(
        frr: Frr) -> None:
    frr.prepare("interface eth1\n ip ospf area 0\nrouter ospf\n ospf router-id 3.3.3.3\n")
    frr.node.runtime.env["FAKE_VTYSH_RC"] = "1"  # type: ignore[attr-defined]
    frr.start(Journal(frr.workdir / "journal"), strict=False)
    ids, whole = calls(frr)[-2:]
    assert ids.endswith(f"-f {frr.identity_file}") and whole.endswith(f"-f {frr.config_file}")
    assert frr.identity_file.read_text() == "router ospf\n ospf router-id 3.3.3.3\nexit\n"
    assert frr.refused() == ["line 2: % Unknown command: frobnicate"]  # once, not twice


def test_a_daemon_that_fails_stops_the_start_and_says_which(frr: Frr) -> None:
    frr.node.runtime.env["FAKE_FAIL"] = "bgpd"  # type: ignore[attr-defined]
    with pytest.raises(LabError, match=r"r1: bgpd: bad option\nbgpd failed to start"):
        frr.start(Journal(frr.workdir / "journal"))
    assert [c.split()[0] for c in calls(frr)] == ["zebra", "bgpd"]  # nothing after it


def test_refused_lines_are_an_error_when_strict_and_kept_when_not(frr: Frr) -> None:
    frr.node.runtime.env["FAKE_VTYSH_RC"] = "1"  # type: ignore[attr-defined]
    with pytest.raises(LabError, match=r"FRR rejected .*frr.conf:\nline 2: % Unknown command"):
        frr.start(Journal(frr.workdir / "journal"))
    frr.clear_stale_sockets()
    frr.start(Journal(frr.workdir / "journal"), strict=False)
    assert frr.refused() == ["line 2: % Unknown command: frobnicate"]


def test_a_socket_that_never_appears_is_named(frr: Frr) -> None:
    executable(frr_module.FRR_SBIN / "staticd", "#!/bin/sh\nexit 0\n")  # starts, no vty
    frr.start_timeout = 0.2
    with pytest.raises(LabError, match=r"staticd.vty did not appear within 0s"):
        frr.start(Journal(frr.workdir / "journal"))
