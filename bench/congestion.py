"""Congestion through fl-port engines: an N:1 incast with and without PFC, ECN marking
against the WRED profile, and what the switch's engine costs per packet, from one run.

Scratch namespaces (harness/testing/incast.py): four senders at 40 Mbit/s into one port
draining at 10 Mbit/s. Every figure is printed absolute and relative to that line rate
(a queue in microseconds of line rate, throughput as a fraction of it), so it means the same
at any emulated speed.

    sudo .venv/bin/python bench/congestion.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from harness.linux.cpu import cpu_s
from harness.testing.incast import LOSSLESS_TC, Buffers, Result, incast

HOST_BPS, PORT_BPS, SENDERS, BURST, SIZE = 40_000_000, 10_000_000, 4, 600, 1400
WIRE = SIZE + 28 + 14 + 24  # UDP/IP, Ethernet, preamble + FCS + gap


def engine_pid(control: Path) -> int:
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and str(control) in (proc / "cmdline").read_text():
                return int(proc.name)
        except OSError:
            continue
    raise RuntimeError(f"no engine serves {control}")


def line_us(nbytes: int) -> float:
    return nbytes * 8 / PORT_BPS * 1e6


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
        paused = nic.queues[LOSSLESS_TC].paused_us / 1e6
        share = paused / result.seconds if result.seconds else 0
        print(f"  h{i}: {result.pauses_on_wire[f'h{i}']} PAUSE frames on its wire, paused "
              f"{paused:.2f} s = {share:.2f} of the burst")


def main() -> None:
    directory = Path(tempfile.mkdtemp(prefix="fl-congestion."))
    print(f"{SENDERS}:1 incast, {BURST} x {SIZE} B per sender, hosts {HOST_BPS / 1e6:.0f} Mbit/s, "
          f"congested port {PORT_BPS / 1e6:.0f} Mbit/s")
    with incast(directory / "pfc", SENDERS, HOST_BPS, PORT_BPS) as fabric:
        pid = engine_pid(fabric.engines["switch"].control)
        before = cpu_s(pid)
        result = fabric.burst(BURST, SIZE)
        spent = cpu_s(pid) - before
        report("with PFC", result)
        frames = sum(q.stats["SAI_QUEUE_STAT_PACKETS"] for p in result.switch.ports.values()
                     for q in p.queues)
        print(f"  switch engine: {spent:.2f} CPU s for {frames} frames = "
              f"{spent / frames * 1e6:.1f} us per frame")
    with incast(directory / "lossy", SENDERS, HOST_BPS, PORT_BPS, pfc=False) as fabric:
        report("without PFC", fabric.burst(BURST, SIZE))
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


if __name__ == "__main__":
    main()
