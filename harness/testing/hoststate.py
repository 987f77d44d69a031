"""The host's own state, to compare before and after a lab: nothing a lab does may show here.

What is compared is what a lab could plausibly reach: the host namespace's links, addresses,
routes, rules and firewall rulesets, the list of network namespaces, the sysctls the project
writes (read in the host namespace, where they must never change), KSM's switches (a lab that
shares memory turns it on; the last one destroyed must put it back), the host's own FRR config
(`/etc/frr`), the entries of `/tmp` (Mininet's global cleanup deletes `/tmp/*.log`) and
`/dev/null`. Counters, address lifetimes and iptables-save's timestamps are left out: they
change anyway.

`/tmp` is every program's: a change there is the lab's only when it names what a lab runs
(fabric-lab's engines, FRR, Mininet, containerlab) or is what Mininet's global cleanup does
(an existing `*.log` deleted). The harness itself writes nothing there, and a node's own
commands get a private `/tmp` (runtime/sandbox.py); another program's files come and go.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import subprocess
from pathlib import Path

from harness.core.paths import lab_dir, lab_netns_prefix
from harness.linux import ksm
from harness.linux.journal import Journal
from harness.linux.nsenter import list_netns
from harness.nodes.frr import frr_leftovers
from harness.runtime.docker import DockerRuntime
from harness.runtime.node import ROUTER_SYSCTLS

COMMANDS = {"links": ["ip", "-j", "link"], "addrs": ["ip", "-j", "addr"],
            "routes4": ["ip", "-j", "-4", "route", "show", "table", "all"],
            "routes6": ["ip", "-j", "-6", "route", "show", "table", "all"],
            "rules4": ["ip", "-j", "-4", "rule"], "rules6": ["ip", "-j", "-6", "rule"],
            "nft": ["nft", "list", "ruleset"], "iptables": ["iptables-save"],
            "ip6tables": ["ip6tables-save"], "netns": ["ip", "netns", "list"]}
# Host-wide sysctls: the ones every node sets in its own namespace, the neighbour-table
# limits the benches raise for a run (shared by all namespaces) and must put back, and the
# ones Mininet's fixLimits raises for good (the mininet runtime must keep it from running).
SYSCTLS = (*ROUTER_SYSCTLS, *(f"net.{afi}.neigh.default.gc_thresh{i}" for afi in ("ipv4", "ipv6")
                              for i in (1, 2, 3)),
           "fs.file-max", "net.core.wmem_max", "net.core.rmem_max", "net.ipv4.tcp_rmem",
           "net.ipv4.tcp_wmem", "net.core.netdev_max_backlog", "net.ipv4.route.max_size",
           "kernel.pty.max")
FRR_CONFIG_DIR = Path("/etc/frr")
TMP = Path("/tmp")
_LABS_OWN = re.compile(r"(^|[-_.])(fabric|fabric-lab|fabric_lab|fl|frr|bfdd|zebra|bgpd|"
                       r"labctl|sai|mininet|mn|clab|containerlab)([-_.]|$)", re.I)
_NOISE = (re.compile(r'"(valid|preferred)_life_time":\d+,?'), re.compile(r"^#.*$", re.M),
          re.compile(r'"stats64":\{.*?\}\}'))


def _command(argv: list[str]) -> str:
    try:
        text = subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
    except FileNotFoundError:
        return f"{argv[0]} not installed"
    for noise in _NOISE:
        text = noise.sub("", text)
    return text


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError as exc:
        return f"unreadable: {exc.strerror}"


def _sysctl(key: str) -> str:
    return _read(Path("/proc/sys", *key.split(".")))


def _tree_digest(root: Path) -> dict[str, str]:
    """Every file below `root` with its content hash and mode."""
    found = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = Path(dirpath, name)
            try:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
                found[str(path)] = f"{digest} {stat.filemode(path.stat().st_mode)}"
            except OSError as exc:
                found[str(path)] = f"unreadable: {exc.strerror}"
    return found


def _tmp_entries(exclude: tuple[str, ...]) -> dict[str, str]:
    """Top-level entries of /tmp: files with size and mtime, directories by name (what other
    programs do inside their own directories is not a lab's doing)."""
    found = {}
    for entry in os.scandir(TMP):
        if entry.name.startswith(exclude):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        found[entry.name] = "dir" if stat.S_ISDIR(st.st_mode) else \
            f"{stat.filemode(st.st_mode)} {st.st_size} {st.st_mtime_ns}"
    return found


def snapshot(tmp_exclude: tuple[str, ...] = ("pytest-of-",)) -> dict[str, object]:
    state: dict[str, object] = {key: _command(argv) for key, argv in COMMANDS.items()}
    state["sysctls"] = {key: _sysctl(key) for key in SYSCTLS}
    state["ksm"] = ksm_state()
    state["etc_frr"] = _tree_digest(FRR_CONFIG_DIR)
    state["tmp"] = _tmp_entries(tmp_exclude)
    state["dev_null"] = stat.filemode(os.stat("/dev/null").st_mode)
    return state


def ksm_state() -> dict[str, object]:
    """KSM's switches a lab changes, and ksmd's scheduling (policy, priority)."""
    return {**{key: _read(ksm.KSM / key) for key in ksm.SETTINGS},
            "ksmd": [ksm.scheduling(pid) for pid in ksm.merging_thread()]}


def lab_tmp_change(name: str, old: object, new: object) -> bool:
    """Whether a change of /tmp entry `name` (None: absent) can be a lab's (module doc)."""
    return bool(_LABS_OWN.search(name)) or (old is not None and new is None
                                            and name.endswith(".log"))


def differences(before: dict[str, object], after: dict[str, object]) -> list[str]:
    """What changed, one line per item: a key's text, or each entry of a mapping (of /tmp,
    only the changes a lab can have made)."""
    changed = []
    for key, old in before.items():
        new = after[key]
        if isinstance(old, dict) and isinstance(new, dict):
            for item in sorted(old.keys() | new.keys()):
                if key == "tmp" and not lab_tmp_change(item, old.get(item), new.get(item)):
                    continue
                if old.get(item) != new.get(item):
                    changed.append(f"{key} {item}: {old.get(item, '(absent)')} -> "
                                   f"{new.get(item, '(absent)')}")
        elif old != new:
            changed.append(f"{key} changed")
    return changed


def lab_leftovers(name: str) -> list[str]:
    """Everything of lab `name` still on the host: nodes of any runtime, files, processes."""
    found = [f"netns {n}" for n in list_netns() if n.startswith(lab_netns_prefix(name))]
    found += [f"container {n}" for n in DockerRuntime(name, Journal(Path(os.devnull)))
              .existing_nodes()]
    if lab_dir(name).exists():
        found.append(f"dir {lab_dir(name)}")
    found += [f"frr state {p}" for p in frr_leftovers(name)]
    found += [f"process {p[:80]}" for p in processes_mentioning(f"{lab_dir(name)}/")]
    return found


def processes_mentioning(marker: str) -> list[str]:
    """'PID: command line' of every process whose command line contains `marker`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmdline:
            found.append(f"{pid}: {cmdline}")
    return found
