"""Packet filters in a node's namespace (native nftables), one table per fault so faults that
overlap on a node (a plane down and a partition) are undone independently."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.core.errors import LabError
from harness.linux.libnft import nft_in_netns

if TYPE_CHECKING:
    from harness.runtime.context import LabContext

PRIORITY = -400  # before conntrack and the spray marks: nothing slips past a fault
LOSS_SCALE = 10_000  # a random share is drawn from this many: 0.01% steps


def table_name(fault_id: int) -> str:
    return f"fl_fault_{fault_id}"


def _nft(lab: LabContext, node: str, script: str) -> None:
    """In-process, not `nft -f` in the node: a fault lands within a millisecond of its mark on
    every runtime (a `docker exec` per switch took ~100 ms)."""
    try:
        nft_in_netns(lab.runtime.netns_path(node), script)
    except LabError as exc:
        raise LabError(f"{node}: {exc} (a fault filter)") from None


def blackhole(lab: LabContext, node: str, fault_id: int) -> None:
    """The node forwards, receives and sends nothing (links stay up: only BFD can tell)."""
    _nft(lab, node, f"""table inet {table_name(fault_id)} {{
  chain in {{ type filter hook prerouting priority {PRIORITY}; policy drop; }}
  chain out {{ type filter hook output priority {PRIORITY}; policy drop; }}
}}
""")


def drop_share(lab: LabContext, node: str, fault_id: int, interfaces: list[str],
               loss_pct: float) -> None:
    """The node drops `loss_pct` of what arrives on these interfaces, each packet at random
    (to 0.01%); everything else is untouched."""
    ports = ", ".join(f'"{name}"' for name in interfaces)
    _nft(lab, node, f"""table inet {table_name(fault_id)} {{
  chain in {{
    type filter hook prerouting priority {PRIORITY};
    iifname {{ {ports} }} numgen random mod {LOSS_SCALE} < {round(loss_pct * LOSS_SCALE / 100)} drop
  }}
}}
""")


def drop_peers(lab: LabContext, node: str, fault_id: int, peers4: list[str],
               peers6: list[str]) -> None:
    """The node exchanges nothing with these addresses; everything else is untouched."""
    rules_in, rules_out = [], []
    for family, peers in (("ip", peers4), ("ip6", peers6)):
        if peers:
            addresses = ", ".join(peers)
            rules_in.append(f"    {family} saddr {{ {addresses} }} drop")
            rules_out.append(f"    {family} daddr {{ {addresses} }} drop")
    _nft(lab, node, "\n".join([
        f"table inet {table_name(fault_id)} {{",
        f"  chain in {{\n    type filter hook prerouting priority {PRIORITY};",
        *rules_in, "  }",
        f"  chain out {{\n    type filter hook output priority {PRIORITY};",
        *rules_out, "  }", "}", ""]))


def remove(lab: LabContext, node: str, fault_id: int) -> None:
    _nft(lab, node, f"table inet {table_name(fault_id)} {{}}\n"
                    f"delete table inet {table_name(fault_id)}\n")
