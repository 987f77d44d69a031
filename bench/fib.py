"""FIB download: 10k routes through zebra -> FPM -> agent -> SAI -> kernel, against zebra
programming the same 10k routes straight into the kernel, in the same run.

Two routers, `direct` (kind frr) and `switch` (kind sai), each get the same 10k static /32
routes from staticd while their only link is down, so zebra holds them unresolved. Bringing
the link up makes zebra resolve and install all of them at once; the clock runs from the link
coming up until the table that forwards (main for `direct`, the SAI table for `switch`) holds
all 10k, seen as the kernel's own route notifications (a listener in the node's namespace;
dumping a 10k-route table every few ms would cost more CPU than it measures). The two are
measured one after the other, so they do not share the CPU.

    sudo .venv/bin/python bench/fib.py [--routes 10000] [--keep]
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import struct
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.lab import Lab, destroy_lab
from harness.nodes.switch import fib_table
from harness.paths import netns_name
from harness.runtime.nsenter import rtnl_socket
from harness.sai.kernel import RTPROT_SAI
from harness.sai.netlink import RTM_NEWROUTE
from harness.topology.augment import augment
from harness.topology.loader import load_file

NAME = "saibench"
TOPOLOGY = f"""
name: {NAME}
topology:
  nodes:
    peer: {{role: spine, kind: frr}}
    direct: {{role: leaf, kind: frr}}
    switch: {{role: leaf, kind: sai}}
  links:
    - endpoints: ["direct:eth1", "peer:eth1"]
    - endpoints: ["switch:eth1", "peer:eth2"]
"""
GOAL = 2.0
BENCH_PREFIXES = "10.200.0.0/14"  # the static routes only, not connected or BGP ones
RTMGRP_IPV4_ROUTE = 0x40
SO_RCVBUFFORCE = 33  # Linux; Python's socket module does not name it
RTPROT_ZEBRA_STATIC = 196
# nlmsghdr (length, type, flags, seq, pid) + the start of rtmsg (family, dst_len, src_len, tos,
# table, protocol): enough to tell a /32 added to one table by one protocol.
_HEADERS = struct.Struct("=IHHIIBBBBBB")


def route_listener(lab: Lab, node: str) -> socket.socket:
    """A netlink socket in the node's namespace that hears every IPv4 route change."""
    sock = rtnl_socket(lab.runtime.netns_path(node))
    sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 64 << 20)
    sock.bind((0, RTMGRP_IPV4_ROUTE))
    sock.settimeout(1.0)
    return sock


def fib_size(lab: Lab, node: str, table: int, proto: int) -> int:
    out = subprocess.run(["ip", "-n", netns_name(NAME, node), "route", "show", "table",
                          str(table), "proto", str(proto), "root", BENCH_PREFIXES],
                         capture_output=True, text=True)
    return out.stdout.count("\n")


def load_routes(lab: Lab, node: str, count: int, gateway: str) -> None:
    """Give staticd `count` /32 routes via `gateway` while the link is down: staticd keeps
    them (its nexthop tracking holds routes whose gateway is unreachable) until it comes up."""
    lab.node(node).cmd("ip", "link", "set", "eth1", "down")
    lines = [
        f"ip route 10.{200 + i // 65536}.{(i // 256) % 256}.{i % 256}/32 {gateway}"
        for i in range(count)]
    with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
        f.write("\n".join(lines) + "\n")
    frr = lab.frr(node)
    subprocess.run(["vtysh", "--vty_socket", str(frr.run_dir), "-f", f.name], check=True,
                   capture_output=True, timeout=1800)
    Path(f.name).unlink()
    configured = frr.vtysh("show running-config").count("\nip route ")
    if configured < count:
        raise SystemExit(f"{node}: staticd holds {configured} of {count} routes")


def measure(lab: Lab, node: str, count: int, proto: int) -> float:
    """Seconds from link up until the kernel has announced `count` /32 routes of `proto` in
    the forwarding table; a dump then confirms they are all there (else listening goes on).
    The listener reads headers only, so it keeps up on a busy box and costs little CPU."""
    table = fib_table(lab.plan.node(node).kind)
    buffer = bytearray(1 << 16)
    heard = 0
    with route_listener(lab, node) as sock:
        start = time.monotonic()
        lab.node(node).cmd("ip", "link", "set", "eth1", "up")
        while True:
            while heard < count:
                if time.monotonic() - start > 600:
                    raise SystemExit(f"{node}: FIB stuck at {heard}/{count}")
                with contextlib.suppress(TimeoutError):
                    sock.recv_into(buffer)
                    _, kind, _, _, _, _, dst_len, _, _, rtm_table, rtm_proto = \
                        _HEADERS.unpack_from(buffer)
                    heard += (kind == RTM_NEWROUTE and dst_len == 32 and rtm_table == table
                              and rtm_proto == proto)
            elapsed = time.monotonic() - start
            heard = fib_size(lab, node, table, proto)
            if heard >= count:
                return elapsed


def gateway(lab: Lab, node: str) -> str:
    interface = lab.plan.node(node).interfaces[0]
    peer = lab.plan.node(interface.peer.node)
    return next(i for i in peer.interfaces if i.name == interface.peer.iface).ipv4.split("/")[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--routes", type=int, default=10_000)
    parser.add_argument("--keep", action="store_true", help="leave the lab up afterwards")
    args = parser.parse_args()
    destroy_lab(NAME)
    with tempfile.NamedTemporaryFile("w", suffix=".yml") as topo:
        topo.write(TOPOLOGY)
        topo.flush()
        lab = Lab(augment(load_file(topo.name)))
    lab.deploy(timeout=180)
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:  # loading is not what is measured
            list(pool.map(lambda n: load_routes(lab, n, args.routes, gateway(lab, n)),
                          ("direct", "switch")))
        direct = measure(lab, "direct", args.routes, RTPROT_ZEBRA_STATIC)
        switch = measure(lab, "switch", args.routes, RTPROT_SAI)
        status = lab.frr("switch").workdir / "agent.log"
        ratio = switch / direct
        print(f"routes: {args.routes}")
        print(f"zebra -> kernel (direct):             {direct:6.2f} s  "
              f"{args.routes / direct:8.0f} routes/s")
        print(f"zebra -> FPM -> agent -> SAI -> kernel: {switch:6.2f} s  "
              f"{args.routes / switch:8.0f} routes/s")
        print(f"ratio (SAI path / direct): {ratio:.2f}x  (goal <= {GOAL:.0f}x: "
              f"{'met' if ratio <= GOAL else 'NOT met'})   agent log: {status}")
    finally:
        if not args.keep:
            lab.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
