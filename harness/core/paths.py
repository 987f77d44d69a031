"""Where labs live on disk: one directory per lab, like containerlab's clab-<name>/.

Every way a lab name reaches the code (a command's argument, `--name`, a topology file, the
pytest plugin, `Lab.open`) goes through `lab_dir`, and so through the one lab-name rule: a name
is never a path, so no command can resolve to (or remove) anything outside the labs root.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from harness.core.errors import LabError

NETNS_PREFIX = "fl"
LAB_NAME_MAX = 24
# No dots: namespace names `fl.<lab>.<node>` stay unambiguous, and '.', '..' and paths are out.
LAB_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]*$"
LAB_NAME_RULE = f"up to {LAB_NAME_MAX} letters, digits, '-' or '_', starting with a letter or digit"
_LAB_NAME = re.compile(LAB_NAME_PATTERN)


def is_lab_name(name: str) -> bool:
    return len(name) <= LAB_NAME_MAX and bool(_LAB_NAME.match(name))


def check_lab_name(name: str) -> str:
    if not is_lab_name(name):
        raise LabError(f"{name!r} is not a lab name: a lab name is {LAB_NAME_RULE}; "
                       "to name a lab by its topology file use `-t FILE`")
    return name


def labs_root() -> Path:
    """Volatile on purpose (like /run/netns): a reboot ends every lab, so it ends their state."""
    return Path(os.environ.get("FABRIC_LAB_ROOT", "/run/fabric-lab"))


def lab_dir(lab: str) -> Path:
    return labs_root() / check_lab_name(lab)


def node_dir(lab: str, node: str) -> Path:
    return lab_dir(lab) / "nodes" / node


FRR_RUN = "run"  # a node's FRR sockets and pid files, inside its node directory
FRR_SBIN = Path("/usr/lib/frr")  # the daemons of Debian's frr package
FRR_STATE = Path("/var/run/frr")  # where they keep a pathspace's sockets by default


def frr_run_dir(lab: str, node: str) -> Path:
    return node_dir(lab, node) / FRR_RUN


def netns_name(lab: str, node: str) -> str:
    """'fl.<lab>.<node>': dots cannot occur in lab or node names, so a prefix is unambiguous."""
    return f"{NETNS_PREFIX}.{lab}.{node}"


def lab_netns_prefix(lab: str) -> str:
    return f"{NETNS_PREFIX}.{check_lab_name(lab)}."


def frr_pathspace(lab: str, node: str) -> str:
    """FRR's `-N` refuses dots, so the pathspace spells the namespace name with colons."""
    return netns_name(lab, node).replace(".", ":")


def bfdd_socket(lab: str, node: str) -> Path:
    """bfdd's control socket, where it tells subscribers each session's state."""
    return FRR_STATE / frr_pathspace(lab, node) / "bfdd.sock"


BFD_SOCKETS = Path("/run/fl-bfd")


def _token(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:8]


def bfd_socket_dir(lab: str, node: str) -> Path:
    """Where a node's bfdd and its BFD offload meet: bfdd keeps only 63 characters of its
    --dplaneaddr path, which a lab directory's path outgrows, so the place is short and
    named by hashes (the lab's first, so a lab's places can be found without its plan)."""
    return BFD_SOCKETS / f"{_token(lab)}-{_token(node)}"


def bfd_socket_dirs(lab: str) -> list[Path]:
    return sorted(BFD_SOCKETS.glob(f"{_token(lab)}-*"))
