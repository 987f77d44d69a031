"""An FRR container image in a containerlab lab, mapped onto the FRR this host runs.

A `kind: linux` node with image frrouting/frr or quay.io/frrouting/frr is an FRR router whose
configuration is the lab's own: the frr.conf its binds put at /etc/frr/frr.conf, applied as
it is, and the daemons its bound /etc/frr/daemons switches on (`bgpd=yes`). Without a daemons
file, the daemons the config has sections for are started, and deploy says so.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.topology.plan import NodePlan

# FRR's own images, and the ones built here (images/: FRR inside), which `labctl export` uses.
FRR_IMAGES = re.compile(r"^((docker\.io/|quay\.io/)?frrouting/frr|fabric-lab/(switch|host))"
                        r"(:[^/]*)?$")
# exec commands that start FRR in a container; here FRR is started by the node's kind.
FRR_STARTS = re.compile(r"frrinit\.sh\s+(re)?start|docker-start|service\s+frr\s+(re)?start|"
                        r"systemctl\s+(re)?start\s+frr|init\.d/frr\s+(re)?start|vtysh\s+-b")
# Config lines that make a daemon write a file: kept inside the lab (see log_paths_in_lab).
_FILE_WRITERS = re.compile(r"^(\s*log\s+file\s+|\s*dump\s+bgp\s+\S+\s+)(\S+)(.*)$")
# Daemons the host's FRR package ships that a lab node may run (zebra always runs).
DAEMONS = ("zebra", "staticd", "bgpd", "ospfd", "ospf6d", "isisd", "ripd", "ripngd", "pimd",
           "ldpd", "nhrpd", "eigrpd", "babeld", "pbrd", "bfdd", "fabricd", "vrrpd", "pathd")
DAEMONS_FILE = "/etc/frr/daemons"
CONFIG_FILE = "/etc/frr/frr.conf"
# Lines (stripped, with a trailing space) that only a given daemon accepts.
_SECTIONS = {"router bgp ": "bgpd", "router ospf6 ": "ospf6d", "router ospf ": "ospfd",
             "ip ospf ": "ospfd", "ipv6 ospf6 ": "ospf6d", "router isis ": "isisd",
             "ip router isis ": "isisd", "ipv6 router isis ": "isisd", "router rip ": "ripd",
             "router ripng ": "ripngd", "router eigrp ": "eigrpd", "router babel ": "babeld",
             "router openfabric ": "fabricd", "bfd ": "bfdd", "mpls ldp ": "ldpd",
             "ip route ": "staticd", "ipv6 route ": "staticd", "ip pim ": "pimd",
             "vrrp ": "vrrpd", "pbr-map ": "pbrd"}


def is_frr_image(image: str | None) -> bool:
    return image is not None and FRR_IMAGES.match(image) is not None


def daemons_from_file(path: Path) -> list[str]:
    """Daemons a daemons file enables (`name=yes`), in FRR's start order, zebra first.
    Raises ValueError naming a daemon this host's FRR does not have."""
    enabled = set()
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        name, sep, value = line.partition("=")
        if sep and value.strip().strip("\"'") == "yes" and not name.endswith("_options"):
            if name not in DAEMONS and name != "vtysh_enable":
                raise ValueError(f"{path}: daemon {name!r} is not one this host's FRR runs "
                                 f"(it has {', '.join(DAEMONS)})")
            enabled.add(name)
    return ["zebra", *(d for d in DAEMONS[1:] if d in enabled)]


def daemons_for_config(config: str) -> list[str]:
    """The daemons whose sections `config` has, plus zebra and staticd (as the image runs)."""
    used = {"zebra", "staticd"}
    for raw in config.splitlines():
        line = raw.strip() + " "
        used |= {daemon for prefix, daemon in _SECTIONS.items() if line.startswith(prefix)}
        if line.startswith("neighbor ") and " bfd " in line:
            used.add("bfdd")
    return [d for d in DAEMONS if d in used]


def frr_mapping(node: NodePlan) -> str:
    """What deploy says an FRR image became on a node."""
    config = "its frr.conf" if node.frr_config else "an empty config (no frr.conf bound)"
    return f"this host's FRR: {', '.join(node.daemons or ())} with {config}"


def log_paths_in_lab(config: str, log_dir: Path) -> str:
    """`config` with every file FRR would write (`log file`, `dump bgp`) moved into the
    node's log folder: on a runtime that shares the host's files, a lab's config must not
    write the host's /var/log/frr or /etc/frr."""
    out = []
    for line in config.splitlines():
        found = _FILE_WRITERS.match(line)
        if found:
            line = f"{found.group(1)}{log_dir / Path(found.group(2)).name}{found.group(3)}"
        out.append(line)
    return "\n".join(out) + "\n"
