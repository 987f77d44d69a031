"""How many packets a second the SRv6 path forwards, against plain forwarding on the same links
in the same run.

On the chain of harness/testing/srv6_chain.py, UDP at full offered load (iperf3, 64 B and
1,400 B) from ha to hb: to fd00:c::2 routed plainly (the baseline), then to fd00:b::2 through
r1's H.Encaps, r2's End.X and r3's End.DT6. Prints what ha sent and hb received in each case,
the ratio of the two deliveries, and for each engine what it forwarded a second (its own
counters) and what it forwards per second of CPU it used: its capacity, since sender, three
engines and receiver share the machine's cores and the offered load caps the first figure.
The userspace engines run as they do (batches) and as they did before issue 40 (a frame at a
time: `batch 0` on their control sockets), in the same run. Every path this kernel can run is
measured: the userspace engine always, the kernel's seg6 where it has it. Goal (issue 28):
>= 100k packets/s per engine.

    sudo .venv/bin/python bench/srv6.py
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from harness.linux.features import feature, has
from harness.nodes.switch.sai import srv6_engine
from harness.testing import srv6_chain
from harness.testing.srv6_chain import TO_R3_V6, Chain

SECONDS = 5
SIZES = (64, 1400)
MTU = 9000  # the chain's links, raised from 1,500 so 1,400 B of UDP fit with the SRH
GOAL_PPS = 100_000
ENGINES = (("r1", "list", ",".join(TO_R3_V6)), ("r2", "sid", TO_R3_V6[0]),
           ("r3", "sid", TO_R3_V6[1]))


def iperf(chain: Chain, address: str, size: int) -> tuple[float, float]:
    """Packets a second ha sent and hb received of a UDP flood."""
    server = subprocess.Popen(["ip", "netns", "exec", chain.names["hb"], "iperf3", "-s", "-1",
                               "-B", address],  # replies from the address the flow went to
                              stdout=subprocess.DEVNULL)
    time.sleep(0.3)
    out = srv6_chain.sh(chain.names["ha"], "iperf3", "-6", "-c", address, "-u", "-b", "0",
                        "-l", str(size), "-t", str(SECONDS), "-J")
    server.wait(timeout=10)
    total = json.loads(out)["end"]["sum"]
    return (total["packets"] / total["seconds"],
            (total["packets"] - total["lost_packets"]) / total["seconds"])


def receive_buffer_drops(chain: Chain) -> int:
    """UDP datagrams hb's kernel dropped for a full socket buffer (a slow receiver)."""
    snmp = srv6_chain.sh(chain.names["hb"], "cat", "/proc/net/snmp6")
    return int(next(line.split()[1] for line in snmp.splitlines()
                    if line.startswith("Udp6RcvbufErrors")))


def cpu_seconds(directory: Path) -> float:
    """CPU time the engine serving `directory` has used (user + system)."""
    pid = subprocess.run(["pgrep", "-f", str(directory / srv6_engine.SOCKET)],
                         capture_output=True, text=True, check=True).stdout.split()[0]
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def forwarded(directory: Path) -> dict[str, int]:
    """Each engine's packet count for its part of the fd00:b::/64 path."""
    counts = {}
    for node, table, name in ENGINES:
        shown = srv6_engine.Engine(directory / node).show()
        rows = shown.sids if table == "sid" else {r["segs"]: r for r in shown.lists.values()}
        counts[node] = int(rows[name]["packets"])
    return counts


MODES = (("batched", "1"), ("before: frame at a time", "0"))


def measure(path: str) -> None:
    with tempfile.TemporaryDirectory() as tmp, srv6_chain.chain(path, Path(tmp)) as chain:
        for node, iface, peer, peer_iface, *_ in srv6_chain.LINKS:  # room for 1,400 B + SRH
            for end, port in ((node, iface), (peer, peer_iface)):
                srv6_chain.sh(chain.names[end], "ip", "link", "set", "dev", port, "mtu", str(MTU))
        srv6_chain.sh(chain.names["ha"], "ping", "-6", "-c", "1", "-W", "2", "fd00:b::2",
                      check=False)  # neighbours resolved before the clock runs
        for size in SIZES:
            for mode, batch in MODES if path == "userspace" else (("", ""),):
                for node, _, _ in ENGINES if batch else ():
                    reply = srv6_engine.Engine(Path(tmp) / node).request(f"batch {batch}")
                    assert reply == "ok", reply
                measure_size(path, chain, Path(tmp), size, mode)


def measure_size(path: str, chain: Chain, tmp: Path, size: int, mode: str) -> None:
    plain_sent, plain = iperf(chain, "fd00:c::2", size)
    engines = [tmp / node for node, _, _ in ENGINES] if path == "userspace" else []
    before = forwarded(tmp) if engines else {}
    cpu_before = [cpu_seconds(d) for d in engines]
    dropped = receive_buffer_drops(chain)
    sent, srv6 = iperf(chain, "fd00:b::2", size)
    dropped = receive_buffer_drops(chain) - dropped
    print(f"{path} {mode} {size} B: plain: ha sent {plain_sent / 1000:6.1f}k pps, hb received "
          f"{plain / 1000:6.1f}k pps; SRv6: ha sent {sent / 1000:6.1f}k pps, hb received "
          f"{srv6 / 1000:6.1f}k pps (ratio of deliveries {srv6 / plain:.2f}); hb's socket "
          f"buffer dropped {dropped / SECONDS / 1000:.1f}k pps of the SRv6 flow")
    if engines:
        after = forwarded(tmp)
        for (node, _, name), directory, cpu in zip(ENGINES, engines, cpu_before,
                                                   strict=True):
            count = after[node] - before[node]
            capacity = count / max(cpu_seconds(directory) - cpu, 1e-3)
            verdict = "ok" if capacity >= GOAL_PPS else f"below {GOAL_PPS // 1000}k"
            print(f"  {node} {name}: forwarded {count / SECONDS / 1000:6.1f}k pps, "
                  f"{capacity / 1000:6.1f}k per CPU second  {verdict}")


def main() -> None:
    print(f"UDP at full offered load for {SECONDS} s, ha -> hb over 3 routers")
    measure("userspace")
    if has("seg6") and has("seg6local"):
        measure("kernel")
    else:
        print(f"kernel: not measured, this kernel has no seg6 ({feature('seg6').detail})")


if __name__ == "__main__":
    main()
