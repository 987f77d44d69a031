"""A port's queues in the kernel: SAI's DSCP -> TC and TC -> queue maps, bound to a port,
become real queues with their own counters.

The kernels met here have HTB but not prio or mqprio, so each port gets an HTB qdisc with one
class per queue (QUEUES of them, unshaped: rate and ceil are the port's speed). HTB puts a
packet in the class its skb priority names; nftables sets that priority at postrouting, after
routing chose the port, from the DSCP by the egress port's own map. A DSCP the map does not
name stays in queue 0 (HTB's default class). The queue counters SAI reads are the classes'
statistics: measured, not computed.

A port whose root qdisc is not ours and not a kernel default (a netem impairment, a tbf rate
limit) is left alone: its maps are refused (NOT_SUPPORTED) rather than replacing what shapes
it. The userspace impairment engine takes frames before the root qdisc, so a QoS check runs
on unimpaired links.
"""

from __future__ import annotations

from typing import Any

from harness.core.errors import LabError
from harness.linux.nsenter import netlink, run_in

QUEUES = 8
HANDLE = 0x5A1  # the HTB qdisc's major number: 5a1: ("SAI")
TABLE = "fl_sai_qos"
KERNEL_DEFAULTS = {"noqueue", "pfifo_fast", "pfifo", "mq", "fq_codel"}
ROOT = 0xFFFFFFFF


class ForeignQdisc(LabError):
    """A port's root qdisc is someone else's (netem, tbf): its maps are refused."""


def classid(queue: int) -> str:
    return f"{HANDLE:x}:{queue + 1:x}"


def dscp_to_queue(dscp_to_tc: dict[int, int], tc_to_queue: dict[int, int]) -> dict[int, int]:
    """The two maps as one, as the port applies them; a TC the second map does not name goes
    to the queue of its own number (SAI's default TC -> queue mapping)."""
    return {dscp: tc_to_queue.get(tc, tc) for dscp, tc in dscp_to_tc.items()}


class PortQueues:
    """The queues of one switch's ports, kept as one nftables table rewritten whole on each
    change (one transaction: no packet sees half a change) and one HTB qdisc per port."""

    def __init__(self, netns_path: str | None) -> None:
        self.netns_path = netns_path
        self.maps: dict[str, dict[int, int]] = {}  # port name -> DSCP -> queue

    def _run(self, argv: list[str], stdin: str | None = None) -> None:
        run_in(self.netns_path, argv, stdin)

    def root(self, ifindex: int) -> Any | None:
        """The port's root qdisc (its netlink message), if it has one."""
        with netlink(self.netns_path) as ip:
            return next((q for q in ip.get_qdiscs(index=ifindex) if q["parent"] == ROOT), None)

    def program(self, port: str, ifindex: int, speed_mbps: int, mapping: dict[int, int]) -> None:
        """Queues on `port` classified by `mapping` (DSCP -> queue); ForeignQdisc when the
        port's root qdisc is someone else's."""
        root = self.root(ifindex)
        kind = root.get_attr("TCA_KIND") if root is not None else None
        ours = kind == "htb" and root["handle"] >> 16 == HANDLE  # type: ignore[index]
        if not ours and kind is not None and kind not in KERNEL_DEFAULTS:
            raise ForeignQdisc(f"its root qdisc is {kind}, not this switch's: QoS maps not "
                               "applied")
        rate = f"{speed_mbps}mbit"
        # HTB cannot change in place: one already there (a warm restart) keeps its queues
        lines = [] if ours else [f"qdisc replace dev {port} root handle {HANDLE:x}: htb default 1"]
        lines += [f"class replace dev {port} parent {HANDLE:x}: classid {classid(q)} htb "
                  f"rate {rate} ceil {rate} quantum 60000" for q in range(QUEUES)]
        self._run(["tc", "-batch", "-"], "\n".join(lines) + "\n")
        self.maps[port] = mapping
        self._write_table()

    def clear(self, port: str) -> None:
        if self.maps.pop(port, None) is None:
            return
        self._write_table()
        self._run(["tc", "qdisc", "del", "dev", port, "root"])

    def _write_table(self) -> None:
        """A chain per port, reached by a verdict map on the egress port, each with inline
        (anonymous) maps: nft 1.0.6 encodes `ip6 dscp` keys of named maps unshifted while its
        lookup does not, so a named map never matches IPv6."""
        chains, jumps = [], []
        for n, (port, mapping) in enumerate(sorted(self.maps.items())):
            pairs = ", ".join(f"{dscp} : {classid(queue)}"
                              for dscp, queue in sorted(mapping.items()))
            chains.append(f"  chain port{n} {{\n"
                          f"    meta priority set ip dscp map {{ {pairs} }}\n"
                          f"    meta priority set ip6 dscp map {{ {pairs} }}\n  }}")
            jumps.append(f'"{port}" : jump port{n}')
        dispatch = f"    oifname vmap {{ {', '.join(jumps)} }}\n" if jumps else ""
        self._run(["nft", "-f", "-"], f"""table inet {TABLE} {{}}
delete table inet {TABLE}
table inet {TABLE} {{
{chr(10).join(chains)}
  chain postrouting {{
    type filter hook postrouting priority 0; policy accept;
{dispatch}  }}
}}
""")

    def stats(self, ifindex: int) -> list[dict[str, Any]]:
        """Each queue's counters, from its HTB class; empty when the port has no queues."""
        with netlink(self.netns_path) as ip:
            classes = {c["handle"] & 0xFFFF: c for c in ip.get_classes(index=ifindex)
                       if c["handle"] >> 16 == HANDLE}
        return [{"queue": minor - 1, "qdisc": "htb", **counters(found)}
                for minor, found in sorted(classes.items())]


def counters(message: Any) -> dict[str, int]:
    """SAI's queue counters from a qdisc's or class's netlink statistics."""
    stats2 = message.get_attr("TCA_STATS2")
    basic = stats2.get_attr("TCA_STATS_BASIC") if stats2 else None
    queue = stats2.get_attr("TCA_STATS_QUEUE") if stats2 else None
    return {"SAI_QUEUE_STAT_PACKETS": int(basic["packets"]) if basic else 0,
            "SAI_QUEUE_STAT_BYTES": int(basic["bytes"]) if basic else 0,
            "SAI_QUEUE_STAT_DROPPED_PACKETS": int(queue["drops"]) if queue else 0,
            "SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES": int(queue["backlog"]) if queue else 0}
