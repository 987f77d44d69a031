"""Congestion through fl-port engines, every figure from one run: an N:1 incast with and
without PFC, headroom from a measured 40 km cable against a 2 km profile (and what
provisioning every port for the longest cable reserves), congestion spreading to a victim,
ECN marking against the WRED profile, and the engines' cost per frame.

Scratch namespaces (harness/testing/incast.py): four senders at 40 Mbit/s into one port
draining at 10 Mbit/s (the cable runs one sender at 100 Mbit/s into 25 Mbit/s). Every
figure is printed absolute and relative to the line rate (a queue in microseconds of line
rate, throughput as a fraction of it), so it means the same at any emulated speed.

    sudo .venv/bin/python bench/congestion.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from harness.linux.cpu import cpu_s
from harness.nodes.switch.sai.headroom import EMULATED_RESPONSE_US, for_km
from harness.testing.incast import LOSSLESS_TC, Buffers, Result, incast

HOST_BPS, PORT_BPS, SENDERS, BURST, SIZE = 40_000_000, 10_000_000, 4, 600, 1400
WIRE = SIZE + 28 + 14 + 24  # UDP/IP, Ethernet, preamble + FCS + gap
CABLE_BPS, CABLE_KM, SWITCH_PORTS = 100_000_000, 40, 64


def engine_pid(control: Path) -> int:
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and str(control) in (proc / "cmdline").read_text():
                return int(proc.name)
        except OSError:
            continue
    raise RuntimeError(f"no engine serves {control}")


def line_us(nbytes: int, rate: int = PORT_BPS) -> float:
    return nbytes * 8 / rate * 1e6


def report(title: str, result: Result) -> None:
    queue = result.switch.port(f"p{SENDERS}").queues[LOSSLESS_TC]
    received = sum(result.received.values())
    rate = received * WIRE * 8 / result.seconds if result.seconds else 0
    print(f"{title}: {received}/{SENDERS * BURST} delivered, lost {result.lost}, "
          f"dropped at the congested queue {queue.stats['SAI_QUEUE_STAT_DROPPED_PACKETS']}")
    print(f"  drained at {rate / 1e6:.2f} Mbit/s = {rate / PORT_BPS:.2f} of line rate; queue "
          f"peak {queue.stats['SAI_QUEUE_STAT_WATERMARK_BYTES']} B = "
          f"{line_us(queue.stats['SAI_QUEUE_STAT_WATERMARK_BYTES']):.0f} us of line rate")
    for i in range(SENDERS):
        nic = result.nics[f"h{i}"].port("eth0")
        group = result.switch.port(f"p{i}").groups[LOSSLESS_TC]
        paused = nic.queues[LOSSLESS_TC].paused_us / 1e6
        share = paused / result.seconds if result.seconds else 0
        beyond = group.stats["SAI_INGRESS_PRIORITY_GROUP_STAT_XOFF_ROOM_WATERMARK_BYTES"] \
            - 2 * (SIZE + 42)
        print(f"  h{i}: {result.pauses_on_wire[f'h{i}']} PAUSE frames on its wire, paused "
              f"{paused:.2f} s = {share:.2f} of the burst; headroom used beyond the two frames "
              f"begun: {max(beyond, 0)} B = {line_us(max(beyond, 0), HOST_BPS):.0f} us "
              f"(the response budget is {EMULATED_RESPONSE_US:.0f} us); admitted past the "
              f"headroom as an engine's lateness (beyond the pause window): "
              f"{group.stats['FL_PG_STAT_LATE_PAUSE_ADMITTED_BYTES']} B")


def cable(directory: Path) -> None:
    print(f"headroom, one sender at {CABLE_BPS / 1e6:.0f} Mbit/s over {CABLE_KM} km into a port "
          f"at a quarter of it:")
    rooms = {}
    for km in (CABLE_KM, 2):
        room = rooms[km] = for_km(km, CABLE_BPS, 1500, EMULATED_RESPONSE_US).bytes
        with incast(directory / f"cable{km}", 1, CABLE_BPS, CABLE_BPS // 4,
                    Buffers(pool=2_000_000, shared=60_000, headroom=room, queue_limit=400_000,
                            wred=None)) as fabric:
            fabric.cable(0, CABLE_KM)
            result = fabric.burst(1000, pps=1.25 * CABLE_BPS / (WIRE * 8))
        stats = result.switch.port("p0").groups[LOSSLESS_TC].stats
        used = stats["SAI_INGRESS_PRIORITY_GROUP_STAT_XOFF_ROOM_WATERMARK_BYTES"]
        print(f"  profile for {km:>2} km: headroom {room} B = {line_us(room, CABLE_BPS):.0f} us "
              f"of line rate; used {used} B, dropped "
              f"{stats['SAI_INGRESS_PRIORITY_GROUP_STAT_DROPPED_PACKETS']}, "
              f"lost {result.lost} of 1000; the engines were at most "
              f"{max(result.switch.pool['late_max_us'], result.nics['h0'].pool['late_max_us'])}"
              f" us late")
    worst = SWITCH_PORTS * rooms[CABLE_KM]
    measured = rooms[CABLE_KM] + (SWITCH_PORTS - 1) * rooms[2]
    print(f"  a {SWITCH_PORTS}-port switch with one {CABLE_KM} km cable: every port provisioned "
          f"for {CABLE_KM} km reserves {worst} B, measured cables {measured} B "
          f"({measured / worst:.2f} of it)")


def spreading(directory: Path) -> None:
    rates = {}
    for pfc in (True, False):
        with incast(directory / f"victim{pfc}", SENDERS, HOST_BPS, PORT_BPS, pfc=pfc,
                    victim=True) as fabric:
            rates[pfc] = fabric.burst(BURST).victim_rate(WIRE)
    print(f"spreading: a victim flow sharing only h0's port with the incast gets "
          f"{rates[True] / 1e6:.2f} Mbit/s with PFC, {rates[False] / 1e6:.2f} without "
          f"({rates[True] / HOST_BPS:.2f} and {rates[False] / HOST_BPS:.2f} of h0's line rate)")


def ecn(directory: Path) -> None:
    low, high, percent = 10_000, 40_000, 50
    with incast(directory / "ecn", 2, HOST_BPS, PORT_BPS,
                Buffers(shared=15_000, wred=(low, high, percent))) as fabric:
        result = fabric.burst(2 * BURST, SIZE)
    queue = result.switch.port("p2").queues[LOSSLESS_TC]
    print(f"ECN: {result.ce} CE marks counted at the receiver, "
          f"{queue.stats['SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS']} by the switch; WRED "
          f"min {low} B max {high} B ({line_us(low):.0f}-{line_us(high):.0f} us of line rate), "
          f"{percent}% at max")
    width = 2 * high / len(queue.hist)
    for bucket, (marked, seen) in enumerate(queue.hist):
        if seen:
            middle = (bucket + 0.5) * width
            expected = min(max((middle - low) / (high - low), 0), 1) * percent
            print(f"  depth {bucket * width / 1000:5.1f}-{(bucket + 1) * width / 1000:5.1f} kB: "
                  f"{marked:4}/{seen:<4} marked = {100 * marked / seen:5.1f}% "
                  f"(profile {expected:5.1f}%)")


def main() -> None:
    directory = Path(tempfile.mkdtemp(prefix="fl-congestion."))
    print(f"{SENDERS}:1 incast, {BURST} x {SIZE} B per sender, hosts {HOST_BPS / 1e6:.0f} Mbit/s, "
          f"congested port {PORT_BPS / 1e6:.0f} Mbit/s")
    with incast(directory / "pfc", SENDERS, HOST_BPS, PORT_BPS) as fabric:
        pids = [engine_pid(e.control) for e in fabric.engines.values()]
        before = [cpu_s(pid) for pid in pids]
        result = fabric.burst(BURST, SIZE)
        spent = [cpu_s(pid) - b for pid, b in zip(pids, before, strict=True)]
        report("with PFC", result)
        frames = sum(q.stats["SAI_QUEUE_STAT_PACKETS"] for p in result.switch.ports.values()
                     for q in p.queues)
        print(f"  engines' CPU: the switch's {spent[0]:.2f} s for {frames} frames = "
              f"{spent[0] / frames * 1e6:.1f} us per frame; the four NICs' {sum(spent[1:]):.2f} s")
    with incast(directory / "lossy", SENDERS, HOST_BPS, PORT_BPS, pfc=False) as fabric:
        report("without PFC", fabric.burst(BURST, SIZE))
    cable(directory)
    spreading(directory)
    ecn(directory)


if __name__ == "__main__":
    main()
