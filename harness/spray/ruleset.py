"""From spray sets to kernel state (pure): nftables marks packets, policy routing steers them.

Every packet to a destination passes an nftables `route` chain in the output hook, which sets
`fwmark = MARK_BASE + plane` with `numgen inc mod N` over that destination's healthy planes: a
strict round robin per packet, not a flow hash. The mark change makes the kernel re-route the
packet, and `ip rule fwmark MARK_BASE+p lookup TABLE_BASE+p` sends it to plane p's table,
which holds a route to the destination via plane p's NIC only. Destinations that share a spray
set share one chain, so a plane failure rewrites a handful of map entries, not every rule.
A packet that already carries a mark (a probe, harness/spray/probe.py, is sent with its
plane's) keeps it: the chain leaves it alone.
"""

from __future__ import annotations

from collections.abc import Mapping

NFT_TABLE = "fl_spray"
MARK_BASE = 0xF100
TABLE_BASE = 1000
RULE_PREF_BASE = 1000

# destination address -> {plane: gateway on that plane's NIC}
SprayState = Mapping[str, Mapping[int, str]]


def plane_mark(plane: int) -> int:
    return MARK_BASE + plane


def plane_table(plane: int) -> int:
    return TABLE_BASE + plane


def chain_name(planes: frozenset[int]) -> str:
    """One chain per spray set, named by its plane bitmask (planes 0, 1, 3 -> 'planes_b')."""
    return f"planes_{sum(1 << p for p in planes):x}"


def _spray_chain(planes: frozenset[int]) -> str:
    slots = ", ".join(f"{i} : {plane_mark(p):#x}" for i, p in enumerate(sorted(planes)))
    return (f"  chain {chain_name(planes)} {{\n"
            f"    meta mark set numgen inc mod {len(planes)} map {{ {slots} }}\n"
            f"  }}\n")


def nft_ruleset(state: SprayState) -> str:
    """An `nft -f` script that atomically replaces the whole spray table with `state`."""
    sets = sorted({frozenset(planes) for planes in state.values() if planes}, key=sorted)
    by_family: dict[str, list[str]] = {"ip": [], "ip6": []}
    for dst, planes in sorted(state.items()):
        if planes:
            family = "ip6" if ":" in dst else "ip"
            by_family[family].append(f"{dst} : jump {chain_name(frozenset(planes))}")
    lines = [f"table inet {NFT_TABLE} {{}}", f"delete table inet {NFT_TABLE}",
             f"table inet {NFT_TABLE} {{"]
    lines += [_spray_chain(s).rstrip("\n") for s in sets]
    lines += ["  chain out {", "    type route hook output priority mangle; policy accept;",
              "    meta mark != 0 accept"]
    for family, elements in by_family.items():
        if elements:
            lines.append(f"    {family} daddr vmap {{ {', '.join(elements)} }}")
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"
