"""Where labs live on disk: one directory per lab, like containerlab's clab-<name>/."""

from __future__ import annotations

import os
from pathlib import Path

NETNS_PREFIX = "fl"


def labs_root() -> Path:
    """Volatile on purpose (like /run/netns): a reboot ends every lab, so it ends their state."""
    return Path(os.environ.get("FABRIC_LAB_ROOT", "/run/fabric-lab"))


def lab_dir(lab: str) -> Path:
    return labs_root() / lab


def node_dir(lab: str, node: str) -> Path:
    return lab_dir(lab) / "nodes" / node


def netns_name(lab: str, node: str) -> str:
    """'fl.<lab>.<node>': dots cannot occur in lab or node names, so a prefix is unambiguous."""
    return f"{NETNS_PREFIX}.{lab}.{node}"


def lab_netns_prefix(lab: str) -> str:
    return f"{NETNS_PREFIX}.{lab}."


def frr_pathspace(lab: str, node: str) -> str:
    """FRR's `-N` refuses dots, so the pathspace spells the namespace name with colons."""
    return netns_name(lab, node).replace(".", ":")
