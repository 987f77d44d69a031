"""A Node is a namespace you can run commands in; kinds add daemons by composition."""

from __future__ import annotations

import subprocess
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from harness.linux.nsenter import netlink, rtnl_socket
from harness.linux.rtnl_batch import LOOPBACK_IFINDEX, RtnlBatch
from harness.runtime.base import Runtime
from harness.topology.plan import NodePlan

if TYPE_CHECKING:
    from pyroute2.iproute import IPRoute

# Set before any link exists, so every interface inherits the `default` values.
ROUTER_SYSCTLS = {
    "net.ipv4.ip_forward": "1",
    "net.ipv4.conf.all.rp_filter": "0",
    "net.ipv4.conf.default.rp_filter": "0",
    "net.ipv4.fib_multipath_hash_policy": "1",  # L4 hash: flows, not host pairs, spread
    "net.ipv6.conf.all.forwarding": "1",
    "net.ipv6.conf.default.forwarding": "1",
    "net.ipv6.fib_multipath_hash_policy": "1",
    "net.ipv6.conf.all.keep_addr_on_down": "1",
    "net.ipv6.conf.default.accept_dad": "0",  # no 1-2 s 'tentative' wait before BGP binds
    "net.ipv6.conf.all.accept_dad": "0",
    "net.ipv6.conf.all.seg6_enabled": "1",
    "net.ipv6.conf.default.seg6_enabled": "1",
    "net.ipv4.icmp_ratelimit": "0",  # probes and traceroutes must not be throttled
    "net.ipv6.icmp.ratelimit": "0",
}
# A plain node (a PC, a bridge) forwards nothing, but gets IPv6 without the DAD wait too.
PLAIN_SYSCTLS = {key: value for key, value in ROUTER_SYSCTLS.items()
                 if "forward" not in key and "multipath" not in key}
# Every namespace hashes flows with the same seed unless told otherwise, so a tier picks
# among its paths exactly as the tier before it did, and only the flows that tier sent one
# way arrive at the next: ECMP polarization (BAG's weighted split measured 0.50 for 0.33).
# Switches seed their hash apart, as real ones do; Linux 6.11 has the per-namespace seed
# (IPv4 and IPv6 alike), earlier kernels have no such knob and stay polarized.
HASH_SEED = "net.ipv4.fib_multipath_hash_seed"


def hash_seed(node: str) -> dict[str, str]:
    """The node's own multipath hash seed, where the kernel takes one (never 0: the default)."""
    if not Path("/proc/sys", *HASH_SEED.split(".")).exists():
        return {}
    return {HASH_SEED: str(zlib.crc32(node.encode()) or 1)}


class Node:
    def __init__(self, plan: NodePlan, runtime: Runtime) -> None:
        self.plan = plan
        self.runtime = runtime

    @property
    def name(self) -> str:
        return self.plan.name

    def cmd(self, *argv: str, timeout: float | None = 60,
            check: bool = False) -> subprocess.CompletedProcess[str]:
        return self.runtime.run(self.name, argv, timeout=timeout, check=check)

    def popen(self, argv: Sequence[str], **kwargs: object) -> subprocess.Popen:
        return self.runtime.popen(self.name, argv, **kwargs)

    def netlink(self) -> IPRoute:
        return netlink(self.runtime.netns_path(self.name))

    def open_batch(self) -> RtnlBatch:
        """One trip into the fresh namespace: router sysctls set (before any link exists, so
        every interface inherits `default`), then `lo` and the loopbacks queued."""
        sysctls = {**ROUTER_SYSCTLS, **hash_seed(self.name)} if self.plan.runs_frr \
            else PLAIN_SYSCTLS
        batch = RtnlBatch(rtnl_socket(self.runtime.netns_path(self.name), sysctls))
        batch.set_up(LOOPBACK_IFINDEX)
        if self.plan.loopback4 and self.plan.loopback6:  # planned for fabric nodes only
            batch.add_address(LOOPBACK_IFINDEX, f"{self.plan.loopback4}/32")
            batch.add_address(LOOPBACK_IFINDEX, f"{self.plan.loopback6}/128")
        return batch
