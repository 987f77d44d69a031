"""fl-port's Python side: the tc filters that take a port's frames to it, and its counters."""

from __future__ import annotations

from harness.nodes.port import redirect
from harness.nodes.port.engine import parse

STATS = """pool size=400000 occupancy=0 watermark=121128 dropped=0 unrouted=0
port 0 name=p0 speed_bps=10000000 tx=8 tx_errors=0
queue 0 3 packets=5 bytes=500 dropped=1 dropped_bytes=100 depth=0 watermark=300 ecn_marked=2 \
wred_dropped=0 paused_us=7 storm=1 wd_detected=1 wd_restored=0 wd_dropped=4 hist=0/4,1/3
pg 0 3 packets=5 bytes=500 occupancy=0 watermark=30282 headroom=0 headroom_watermark=1442 \
dropped=0 late_packets=3 late_bytes=4326 pausing=1 pfc_rx=2 pfc_tx=138
"""


def test_counters_carry_sai_names() -> None:
    counters = parse(STATS)
    port = counters.port("p0")
    queue, group = port.queues[0], port.groups[0]
    assert counters.pool["watermark"] == 121128
    assert queue.stats["SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS"] == 2
    assert queue.stats["PFC_WD_QUEUE_STATS_TX_DROPPED_PACKETS"] == 4
    assert queue.storm and queue.paused_us == 7 and queue.hist == [(0, 4), (1, 3)]
    assert group.stats["SAI_INGRESS_PRIORITY_GROUP_STAT_XOFF_ROOM_WATERMARK_BYTES"] == 1442
    assert group.stats["FL_PG_STAT_LATE_PAUSE_ADMITTED_BYTES"] == 4326
    assert port.sai()["SAI_PORT_STAT_PFC_0_TX_PKTS"] == 138


def test_mark_filter_is_classic_bpf_matching_the_mark_under_its_mask() -> None:
    """Run the bytecode by hand on marks: it must say yes exactly for (mark & mask) == value."""
    def run(program: str, skb_mark: int) -> bool:
        ops = [tuple(map(int, op.split())) for op in program.split(",")[1:]]
        a, pc = 0, 0
        while True:
            code, jt, jf, k = ops[pc]
            if code == redirect.LD_MARK:
                a = skb_mark
            elif code == redirect.AND_K:
                a &= k
            elif code == redirect.JEQ_K:
                pc += jt if a == k else jf
            elif code == redirect.RET_K:
                return k != 0
            pc += 1

    exact = redirect.mark_filter(redirect.ingress_mark(3), 0xFFFFFFFF)
    assert run(exact, redirect.ingress_mark(3))
    assert not run(exact, redirect.ingress_mark(4))
    assert not run(exact, redirect.DONE_MARK)
    nic = redirect.mark_filter(0, redirect.DONE_MARK)
    assert run(nic, 0) and run(nic, 0x1001)  # a spray mark still goes through the NIC
    assert not run(nic, redirect.DONE_MARK)


def test_a_switch_port_sends_each_ingress_port_to_its_own_tap() -> None:
    commands = redirect.switch_redirects("eth1", [0, 1])
    assert commands[0] == ["qdisc", "replace", "dev", "eth1", "clsact"]
    assert [c[-1] for c in commands[1:]] == ["flp0", "flp1", "flpc"]
    assert "'4294963220" not in redirect.batch(commands)  # the bytecode is one quoted word
    assert f"'{redirect.mark_filter(redirect.ingress_mark(0), 0xFFFFFFFF)}'" in \
        redirect.batch(commands)
    ruleset = redirect.marks_ruleset({"eth1": 0, "eth2": 1})
    assert '"eth1" : 0x5a200001, "eth2" : 0x5a200002' in ruleset
