"""How a port's egress frames reach fl-port and leave it again (pure: names in, commands out).

tc's clsact egress on each engine port redirects (a classic BPF filter on the skb mark, then
mirred: u32's mark match is a kernel option these kernels lack) to a sink TAP the engine
reads. On a switch the TAP says where the frame came in: nftables marks every
frame at prerouting with its ingress port (`ingress_mark`), each egress port has one filter
per ingress port to that port's TAP, and frames the switch itself sends (mark 0) go to the
CPU's TAP. A NIC has one TAP. The engine sends with DONE_MARK, which no filter here matches,
so an impairment engine's filter further along (pref 7, harness/links/impair) still takes
the frame: the queue comes before the cable, and so does PAUSE.
"""

from __future__ import annotations

import shlex

FILTER_PREF = "5"  # ahead of the impairment engine's 7
MARK_TAG = 0x5A200000
DONE_MARK = 0x40000000  # fl_port.c's, on everything it sends
TABLE = "fl_port"
TAP_PREFIX = "flp"  # every TAP of a switch's engine: none is a port (the agent skips them)
CPU_TAP = f"{TAP_PREFIX}c"


def tap_of(port_id: int) -> str:
    """A switch port's TAP: the frames that came in on port `port_id`."""
    return f"{TAP_PREFIX}{port_id}"


def nic_tap(ifindex: int) -> str:
    """A NIC's TAP: its port's egress frames."""
    return f"fln{ifindex}"


def ingress_mark(port_id: int) -> int:
    return MARK_TAG | (port_id + 1)


# Classic BPF: A = skb->mark (SKF_AD_OFF + SKF_AD_MARK), A &= mask, match when A == mark.
LD_MARK, AND_K, JEQ_K, RET_K = 0x20, 0x54, 0x15, 0x06
SKF_AD_MARK = 0xFFFFF000 + 20


def mark_filter(mark: int, mask: int) -> str:
    """cls_bpf's `bytecode` form of "(skb mark & mask) == mark"."""
    program = [(LD_MARK, 0, 0, SKF_AD_MARK), (AND_K, 0, 0, mask), (JEQ_K, 0, 1, mark),
               (RET_K, 0, 0, 0xFFFFFFFF), (RET_K, 0, 0, 0)]
    return ",".join([str(len(program)), *(" ".join(map(str, op)) for op in program)])


def _redirect(port: str, mark: int, mask: int, tap: str) -> list[str]:
    return ["filter", "add", "dev", port, "egress", "pref", FILTER_PREF, "protocol", "all",
            "bpf", "bytecode", mark_filter(mark, mask), "action", "mirred", "egress",
            "redirect", "dev", tap]


def switch_redirects(port: str, port_ids: list[int]) -> list[list[str]]:
    """tc commands: `port`'s egress frames to the TAP of the port each came in on."""
    return [["qdisc", "replace", "dev", port, "clsact"],
            *(_redirect(port, ingress_mark(i), 0xFFFFFFFF, tap_of(i)) for i in port_ids),
            _redirect(port, 0, 0xFFFFFFFF, CPU_TAP)]


def nic_redirects(iface: str, tap: str) -> list[list[str]]:
    """tc commands: every egress frame not yet through the engine to its TAP."""
    return [["qdisc", "replace", "dev", iface, "clsact"], _redirect(iface, 0, DONE_MARK, tap)]


def unredirect(port: str) -> list[str]:
    return ["filter", "del", "dev", port, "egress", "pref", FILTER_PREF]


def batch(commands: list[list[str]]) -> str:
    """`tc -batch -` input for tc commands."""
    return "".join(shlex.join(c) + "\n" for c in commands)


def marks_ruleset(ports: dict[str, int]) -> str:
    """nft -f text: each frame marked with the port it came in on, before routing."""
    pairs = ", ".join(f'"{name}" : {ingress_mark(i):#x}' for name, i in sorted(ports.items()))
    rule = f"    meta mark set iifname map {{ {pairs} }}\n" if pairs else ""
    return (f"table inet {TABLE} {{}}\ndelete table inet {TABLE}\ntable inet {TABLE} {{\n"
            f"  chain prerouting {{\n    type filter hook prerouting priority -300; "
            f"policy accept;\n{rule}  }}\n}}\n")
