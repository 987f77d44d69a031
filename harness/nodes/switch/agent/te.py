"""The switch's SRv6 TE policies, run as an SR-TE headend runs them: each steers its prefix
into the most preferred path that works, and a path works while its probes come back.

Every interval the agent sends each path a probe: an IPv6 packet from its loopback to its
loopback (UDP, PROBE_PORT) that it encapsulates itself, as H.Encaps would, with the path's
probe SID list. That list is the path's own up to the tail, where End.DT6 hands the inner
packet back to routing, which brings it home: a probe that returns crossed every link and SID
of the path (RFC 9087's loopback measurement).

A path is judged at each tick, after the probes waiting in the socket are read (a headend that
woke late must not blame the path for its own sleep). It is broken after `misses` ticks in a
row with none of its probes back, and usable again after `up` probes of consecutive sequence
numbers came back (a path that loses every other probe never gets there) and `hold_down` has
passed since it broke, so a flapping path cannot swing the policy faster than that. Misses are
counted in ticks, not in elapsed time: a headend descheduled for several intervals sent no
probes then, and its probes that were only late come back in the next tick. The route to the
prefix, and every route zebra has inside it (a campus's hosts' /128s), is pinned by the
agent's route orchestrator to the chosen path's next hop, which the configuration channel made
(`te-policies.json` names them by their keys): the policy steers all traffic for its
destination, whatever more specific routes BGP brings, and nothing waits on BGP, which knows
nothing of policies.

The document, as harness/nodes/switch/render.py writes it:

    {"source": "fd00:0:0:1::1",
     "policies": [{"name": "v6-c1-to-c2", "prefix": "fd00:100:2::/64",
                   "probe_interval_us": 10000, "probe_misses": 3, "probe_up": 3,
                   "hold_down_us": 500000,
                   "paths": [{"next_hop": "NEXT_HOP|v6-c1-to-c2", "hops": ["bb1", "bb2", "bb3"],
                              "probe": ["fcbb:bbbb:2:1002::", "fcbb:bbbb:3:d6::"]}, ...]}]}
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import struct
import time
from dataclasses import dataclass, field
from ipaddress import IPv6Address
from pathlib import Path
from typing import Any

from harness.nodes.switch.agent.config import ConfigOrch
from harness.nodes.switch.agent.orch import RouteOrch
from harness.nodes.switch.sai.types import IpPrefix

PROBE_PORT = 3785 + 10_000  # out of BFD's way; the agent's own
MAGIC = 0x5352_5445  # "SRTE"
_PROBE = struct.Struct("!IHHIQ")  # magic, policy, path, sequence, sent (ns)
NH_ROUTING, NH_IPV6, NH_UDP = 43, 41, 17
log = logging.getLogger("agent")


def within(prefix: IpPrefix, network: IpPrefix) -> bool:
    """`prefix` is `network` or more specific inside it."""
    if len(prefix.packed) != len(network.packed) or prefix.length < network.length:
        return False
    bits = len(prefix.packed) * 8
    shift = bits - network.length
    return int.from_bytes(prefix.packed, "big") >> shift == \
        int.from_bytes(network.packed, "big") >> shift


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF or 0xFFFF


def probe_packet(source: IPv6Address, segments: list[IPv6Address], payload: bytes) -> bytes:
    """Outer IPv6 + SRH (Segments Left pointing at the first SID) around IPv6/UDP to `source`."""
    udp_len = 8 + len(payload)
    pseudo = source.packed * 2 + struct.pack("!I3xB", udp_len, NH_UDP)
    unsummed = struct.pack("!HHHH", PROBE_PORT, PROBE_PORT, udp_len, 0) + payload
    udp = struct.pack("!HHHH", PROBE_PORT, PROBE_PORT, udp_len,
                      _checksum(pseudo + unsummed)) + payload
    inner = struct.pack("!IHBB", 6 << 28, len(udp), NH_UDP, 64) + source.packed * 2 + udp
    n = len(segments)
    srh = struct.pack("!BBBBBBH", NH_IPV6, 2 * n, 4, n - 1, n - 1, 0, 0) + b"".join(
        s.packed for s in reversed(segments))
    return (struct.pack("!IHBB", 6 << 28, len(srh) + len(inner), NH_ROUTING, 64)
            + source.packed + segments[0].packed + srh + inner)


@dataclass
class TePath:
    next_hop: str
    hops: list[str]
    probe: list[IPv6Address]
    sent: int = 0
    received: int = 0
    last_seq: int = 0  # the sequence number of the last probe back
    in_a_row: int = 0  # probes of consecutive sequence numbers back
    back: bool = False  # a probe came back since the last judgement
    missed: int = 0  # judgements in a row with none back
    up: bool = False
    down_at: float = float("-inf")  # monotonic time it last broke
    downs: int = 0

    def judge(self, now: float, misses: int, up: int, hold_down_s: float) -> None:
        if self.back:
            self.missed = 0
        elif self.sent:
            self.missed += 1
        self.back = False
        if self.missed >= misses:
            self.in_a_row = 0
            if self.up:
                self.up, self.down_at, self.downs = False, now, self.downs + 1
        elif not self.up and self.in_a_row >= up and now - self.down_at >= hold_down_s:
            self.up = True

    def returned(self, sequence: int) -> None:
        """A probe of this path came back (ones overtaken by a later one are only counted)."""
        self.received += 1
        if sequence <= self.last_seq:
            return
        self.in_a_row = self.in_a_row + 1 if sequence == self.last_seq + 1 else 1
        self.last_seq, self.back = sequence, True


@dataclass
class Policy:
    name: str
    prefix: IpPrefix
    interval_s: float
    misses: int
    up: int
    hold_down_s: float
    paths: list[TePath]
    active: int | None = None  # index of the path the route follows
    switches: list[dict[str, Any]] = field(default_factory=list)  # when and where it moved
    steered: set[IpPrefix] = field(default_factory=set)  # its prefix and zebra's inside it


class TeOrch:
    """The policies of one headend, their probes and the routes they steer."""

    def __init__(self, config: ConfigOrch, routes: RouteOrch) -> None:
        self.config, self.routes = config, routes
        self.source: IPv6Address | None = None
        self.policies: list[Policy] = []
        self.sender: socket.socket | None = None
        self.receiver: socket.socket | None = None
        self.next_due = float("inf")

    def load(self, path: Path) -> None:
        """Take the document at `path` (none there: no policies); routes of policies it no
        longer has go back to zebra."""
        document = json.loads(path.read_text()) if path.exists() else {"policies": []}
        for policy in self.policies:  # steered afresh below; what no policy covers goes back
            for prefix in policy.steered:
                self.routes.unpin(prefix)
        self.source = IPv6Address(document["source"]) if document.get("source") else None
        self.policies = [Policy(
            name=p["name"], prefix=IpPrefix.parse(p["prefix"]),
            interval_s=p["probe_interval_us"] / 1e6, misses=p["probe_misses"],
            up=p["probe_up"], hold_down_s=p["hold_down_us"] / 1e6,
            paths=[TePath(next_hop=q["next_hop"], hops=q["hops"],
                         probe=[IPv6Address(s) for s in q["probe"]]) for q in p["paths"]])
            for p in document["policies"]]
        for policy in self.policies:
            self._steer(policy, "loaded")
        self.next_due = time.monotonic() if self.policies else float("inf")

    def open(self) -> socket.socket | None:
        """The probes' sockets once the source address is there; the receiver to select on."""
        if self.receiver is not None or self.source is None or not self.policies:
            return None
        try:
            receiver = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
            receiver.bind((str(self.source), PROBE_PORT))
        except OSError as exc:  # the loopback address is not up yet: tried again next tick
            log.warning("TE probes cannot listen on [%s]:%d yet: %s", self.source,
                        PROBE_PORT, exc)
            return None
        receiver.setblocking(False)
        self.sender = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
        self.receiver = receiver
        return receiver

    def tick(self) -> None:
        """Read the probes back, judge every path, steer, send the next probes."""
        now = time.monotonic()
        if now < self.next_due or self.source is None:
            return
        if self.receiver is not None:
            self.receive()
        for i, policy in enumerate(self.policies):
            for j, path in enumerate(policy.paths):
                path.judge(now, policy.misses, policy.up, policy.hold_down_s)
                self._send(i, j, path)
            self._steer(policy, "probes")
        self.next_due = now + min(p.interval_s for p in self.policies)

    def _send(self, i: int, j: int, path: TePath) -> None:
        if self.sender is None or self.source is None:
            return
        path.sent += 1
        payload = _PROBE.pack(MAGIC, i, j, path.sent, time.monotonic_ns())
        with contextlib.suppress(OSError):  # no route to the first SID: lost, as on the wire
            self.sender.sendto(probe_packet(self.source, path.probe, payload),
                               (str(path.probe[0]), 0))

    def receive(self) -> None:
        assert self.receiver is not None
        while True:
            try:
                data = self.receiver.recv(64)
            except BlockingIOError:
                return
            if len(data) != _PROBE.size:
                continue
            magic, i, j, sequence, _ = _PROBE.unpack(data)
            if magic != MAGIC or i >= len(self.policies) or j >= len(self.policies[i].paths):
                continue
            self.policies[i].paths[j].returned(sequence)

    def claim(self, prefix: IpPrefix) -> bool:
        """A route zebra brings inside a policy's prefix, pinned before it is ever programmed
        (RouteOrch asks); False if no policy holds it, or its path's next hop is not made."""
        policy = next((p for p in self.policies if p.active is not None
                       and within(prefix, p.prefix)), None)
        if policy is None or not self._pin(policy, policy.active, {prefix}):  # type: ignore[arg-type]
            return False
        log.info("TE %s: zebra's new route %s steered as it came", policy.name, prefix)
        return True

    def cover(self) -> None:
        """Steer the routes zebra brought inside a policy's prefix that no claim took (their
        path's next hop was not made yet)."""
        for policy in self.policies:
            if policy.active is None:
                continue
            new = {p for p in self.routes.wanted if within(p, policy.prefix)} - policy.steered
            if new:
                self._pin(policy, policy.active, new)

    def _steer(self, policy: Policy, why: str) -> None:
        """The routes to the first path that is up, else to the one already used (or the
        first): with every path broken there is nothing better to do."""
        want = next((j for j, p in enumerate(policy.paths) if p.up), None)
        if want is None:
            want = policy.active if policy.active is not None else 0
        if want == policy.active:
            return
        prefixes = {policy.prefix} | {p for p in self.routes.wanted if within(p, policy.prefix)}
        if self._pin(policy, want, prefixes):
            if policy.active is not None:
                log.info("TE %s: %s -> %s (%s)", policy.name, " ".join(
                    policy.paths[policy.active].hops), " ".join(policy.paths[want].hops), why)
            policy.switches.append({"at": time.time(), "to": want, "why": why})
            policy.active = want

    def _pin(self, policy: Policy, path: int, prefixes: set[IpPrefix]) -> bool:
        """Pin `prefixes` to `path`'s next hop; False if that is not made (yet: the
        configuration says why) or the switch refused."""
        hop = self.config.refs.get(policy.paths[path].next_hop)
        if hop is None:
            return False
        ok = True
        for prefix in sorted(prefixes, key=lambda p: p.length):  # the policy's own first
            status = self.routes.pin(prefix, {"SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID": hop})
            if status.ok:
                policy.steered.add(prefix)
            ok &= status.ok
        return ok

    def status(self) -> list[dict[str, Any]]:
        return [{"name": p.name, "prefix": str(p.prefix),
                 "active": p.paths[p.active].hops if p.active is not None else None,
                 "steered": sorted(str(q) for q in p.steered),
                 "switches": p.switches[-10:], "moves": sum(
                     1 for s in p.switches if s["why"] == "probes"),
                 "paths": [{"hops": q.hops, "up": q.up, "sent": q.sent, "received": q.received,
                            "downs": q.downs} for q in p.paths]} for p in self.policies]
