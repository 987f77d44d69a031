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

FRR_IMAGES = re.compile(r"^(docker\.io/|quay\.io/)?frrouting/frr(:[^/]*)?$")
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
    config = f"config {node.frr_config}" if node.frr_config else "no frr.conf bound"
    return f"this host's FRR ({', '.join(node.daemons or ())}; {config})"
