"""A config's router IDs, applied before the rest of it.

vtysh applies frr.conf line by line, and FRR writes interfaces before `router ospf`: their
`ip ospf area` starts OSPF under the router ID zebra picked (the highest address) while the
configured one is still some lines away. If a neighbour reaches Full in between, ospfd and
ospf6d keep the picked ID ("For this router-id change to take effect ...") and the router
floods under the wrong name, which the docker suite saw under load (r3 as 192.168.3.1, not its
3.3.3.3). Setting the IDs first makes a booting router's identity the configured one, every time.
"""

from __future__ import annotations

import re

_OSPF = re.compile(r"^router ospf6?( |$)")
_OSPF_ID = re.compile(r"^\s*(ospf6? )?router-id \S+\s*$")  # the bare form is FRR's hidden one
_ZEBRA_ID = re.compile(r"^(ip )?router-id \S+( vrf \S+)?\s*$")
_LEAVES = re.compile(r"^\s*(exit|end)\s*$")


def router_ids(config: str) -> str:
    """The lines of `config` that set a router ID (zebra's, and each OSPF instance's under its
    `router ospf` line), as a config of their own; '' when it sets none. A router-id line
    belongs to the last `router ospf` above it until an `exit` or an unindented other line,
    as FRR reads it."""
    out: list[str] = []
    section: str | None = None
    for raw in config.splitlines():
        line = raw.rstrip()
        if not line.strip() or line.lstrip().startswith("!"):
            continue
        if _OSPF.match(line):
            section = line
        elif section is not None and _OSPF_ID.match(line):
            out += [section, f" {line.strip()}", "exit"]
        elif section is None or not line[0].isspace() or _LEAVES.match(line):
            section = None
            if _ZEBRA_ID.match(line):
                out.append(line)
    return "\n".join(out) + "\n" if out else ""
