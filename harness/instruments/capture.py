"""One capture across a lab's ports: every frame each port sends and receives, in one pcapng
(harness/instruments/pcapng.py) with an interface per port, merged in kernel-timestamp order.

labctl's own process opens an AF_PACKET socket per port inside the port's node (from a
short-lived thread, harness/linux/nsenter.py), so a capture works alike on every runtime and
starts nothing in the nodes. The kernel stamps each frame (SO_TIMESTAMPNS: CLOCK_REALTIME, one
clock for every namespace) and runs the BPF filter before the frame is queued.

A port whose link has a userspace impairment engine (harness/links/impair/userspace.py) sends
nothing past its own taps: tc redirects its egress to the engine's TAP and the engine sends it on
with PACKET_QDISC_BYPASS. So that port's outbound frames are taken where tc hands them to the
engine (the TAP's egress), stamped as they enter the link. Engines come and go with `labctl
netem` and faults; each node's link events make the capture look again.

Frames wait REORDER_S before they are written, so ports read in whatever order still come out
in time order; a frame the kernel queued later than that (a host far past its capacity) is
written as it comes and counted as late.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import heapq
import itertools
import select
import socket
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, BinaryIO

from harness.core.errors import LabError, UsageError
from harness.faults.targets import plane_switches, resolve_link, select_nodes
from harness.instruments.pcapng import INBOUND, LINKTYPE_ETHERNET, OUTBOUND, PcapngWriter
from harness.links.impair.userspace import tap_name
from harness.linux.nsenter import call_in_netns
from harness.linux.rtnl_batch import RTMGRP_LINK, SO_RCVBUFFORCE, subscribe
from harness.topology.plan import Endpoint, LabPlan

if TYPE_CHECKING:
    from harness.runtime.context import LabContext

SNAPLEN = 262144  # tcpdump's: a GSO frame on a veth is up to 64 KiB
REORDER_S = 0.2
POLL_S = 0.05
READ_BATCH = 1024  # frames per socket per turn: one busy port cannot starve the others
RCVBUF = 8 << 20
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SOL_PACKET, PACKET_STATISTICS = 263, 6
SO_TIMESTAMPNS, SO_ATTACH_FILTER = 35, 26
TIMESPEC = struct.Struct("@qq")
PCAP_NETMASK_UNKNOWN = -1  # no broadcast address: 'ip broadcast' is refused, as tcpdump -y
GONE = (errno.ENODEV, errno.ENXIO)  # the device was deleted: this socket hears no more


def select_ports(plan: LabPlan, targets: Sequence[str], planes: Sequence[int] = ()
                 ) -> list[Endpoint]:
    """Ports named as people say them: 'node:iface' (one port), 'nodeA--nodeB' (both ends of
    every link between them), a node or a pattern ('leaf*', each of its ports); and for each
    plane, both ends of every link into or inside it."""
    found: list[Endpoint] = []
    for target in targets:
        if "--" in target:
            left, _, right = target.partition("--")
            links = [link for link in plan.links if {left, right} in
                     ({str(link.a), str(link.b)}, {link.a.node, link.b.node})]
            found += [end for link in links or [resolve_link(plan, target)[0]]
                      for end in (link.a, link.b)]
        elif ":" in target:
            found += resolve_link(plan, target)[1]
        else:
            found += [end for node in select_nodes(plan, target)
                      for end in plan.link_ends if end.node == node]
    for plane in planes:
        inside = set(plane_switches(plan, plane))
        found += [end for link in plan.links if {link.a.node, link.b.node} & inside
                  for end in (link.a, link.b)]
    if not found:
        raise UsageError("name the ports to capture: NODE:PORT, NODE, NODE--NODE or --plane N")
    return list(dict.fromkeys(found))


def bpf_program(expression: str, snaplen: int = SNAPLEN) -> bytes:
    """`expression` (tcpdump's syntax) as classic BPF for an Ethernet port, compiled by
    libpcap as tcpdump would (its accept returns the snaplen); b'' for none."""
    if not expression:
        return b""
    try:
        from scapy.libs import winpcapy as pcap  # libpcap through ctypes, only when filtering
    except OSError as exc:
        raise UsageError(f"a filter needs libpcap (apt install libpcap0.8): {exc}") from None
    handle = pcap.pcap_open_dead(LINKTYPE_ETHERNET, snaplen)
    program = pcap.bpf_program()
    try:
        if pcap.pcap_compile(handle, ctypes.byref(program), expression.encode(), 1,
                             PCAP_NETMASK_UNKNOWN) != 0:
            raise UsageError(f"filter {expression!r}: {pcap.pcap_geterr(handle).decode()}")
        code = ctypes.string_at(program.bf_insns, program.bf_len * 8)
        pcap.pcap_freecode(ctypes.byref(program))
        return code
    finally:
        pcap.pcap_close(handle)


def _attach(sock: socket.socket, program: bytes) -> None:
    code = ctypes.create_string_buffer(program, len(program))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER,
                    struct.pack("HL", len(program) // 8, ctypes.addressof(code)))


def _packet_socket(device: str, program: bytes) -> socket.socket:
    """A packet socket on `device` of the calling thread's namespace, filtered before it is
    bound, so no unfiltered frame gets queued in between."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)  # hears nothing yet
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF)
        if program:
            _attach(sock, program)
        sock.bind((device, ETH_P_ALL))
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def _stamp(ancillary: list[tuple[int, int, bytes]]) -> int:
    """The kernel's timestamp of a frame, in ns (now, should the kernel have given none)."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            seconds, ns = TIMESPEC.unpack(data)
            return seconds * 1_000_000_000 + ns
    return time.time_ns()


@dataclass
class Tap:
    """One packet socket feeding a port's interface block: the port itself, or the TAP its
    impairment engine reads (outbound frames only)."""

    port: Endpoint
    interface: int
    device: str
    ifindex: int
    sock: socket.socket
    engine: bool

    def fileno(self) -> int:
        return self.sock.fileno()

    def dropped(self) -> int:
        """Frames the kernel dropped since last asked (the socket's queue was full)."""
        with contextlib.suppress(OSError):
            return struct.unpack("II", self.sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))[1]
        return 0


@dataclass(order=True)
class Frame:
    ns: int
    seq: int
    interface: int = field(compare=False)
    data: bytes = field(compare=False)
    length: int = field(compare=False)
    direction: int = field(compare=False)


@dataclass
class PortCount:
    frames: int = 0
    dropped: int = 0
    listened: str = ""


@dataclass
class Summary:
    ports: dict[Endpoint, PortCount]
    late: int
    stopped_by: str

    @property
    def frames(self) -> int:
        return sum(p.frames for p in self.ports.values())

    @property
    def dropped(self) -> int:
        return sum(p.dropped for p in self.ports.values())


class LinkWatch:
    """A node's link events: an impairment engine's TAP appearing or going away."""

    def __init__(self, node: str, netns: str) -> None:
        self.node = node

        self.sock = call_in_netns(netns, lambda: subscribe(RTMGRP_LINK))

    def fileno(self) -> int:
        return self.sock.fileno()

    def drain(self) -> None:
        """Read every pending event (lost ones, ENOBUFS, change nothing: the node is looked
        at again whatever they said)."""
        with contextlib.suppress(OSError):
            while self.sock.recv(1 << 16):
                pass


class Capture:
    """Open with the lab's ports, then `run` until a count, a duration or a stop; the pcapng is
    complete (every port's statistics written) once `run` returns."""

    def __init__(self, lab: LabContext, ports: Sequence[Endpoint], out: BinaryIO, *,
                 expression: str = "", snaplen: int = SNAPLEN) -> None:
        self.lab, self.out, self.snaplen = lab, out, snaplen
        self.program = bpf_program(expression, snaplen)
        self.writer = PcapngWriter(out, "fabric-lab labctl capture")
        self.counts: dict[Endpoint, PortCount] = {}
        self.interface: dict[Endpoint, int] = {}
        self.taps: list[Tap] = []
        self.watches: list[LinkWatch] = []
        self.buffer = bytearray(snaplen)
        self.pending: list[Frame] = []
        self.seq = itertools.count()
        self.written_ns = 0
        self.late = 0
        self.started_ns = time.time_ns()
        try:
            for port in ports:
                self._add_port(port)
            for node in dict.fromkeys(p.node for p in ports):
                self.watches.append(LinkWatch(node, lab.runtime.netns_path(node)))
        except BaseException:
            self.close()
            raise

    def _add_port(self, port: Endpoint) -> None:
        link = self.lab.plan.link_ends.get(port)
        self.interface[port] = self.writer.add_interface(
            str(port), f"lab {self.lab.plan.name}" + (f", link {link.name}" if link else ""),
            self.snaplen)
        self.counts[port] = PortCount()
        self._open(port)

    def _open(self, port: Endpoint) -> None:
        """The port's own socket (both directions), and its engine's TAP when one runs."""
        def opened() -> list[tuple[str, int, socket.socket]]:
            devices = {port.iface: socket.if_nametoindex(port.iface)}
            tap = tap_name(devices[port.iface])
            with contextlib.suppress(OSError):  # no impairment engine on the port's link now
                devices[tap] = socket.if_nametoindex(tap)
            return [(device, index, _packet_socket(device, self.program))
                    for device, index in devices.items() if not self._listening(port, device)]
        try:
            new = call_in_netns(self.lab.runtime.netns_path(port.node), opened)
        except OSError as exc:
            raise LabError(f"cannot capture on {port}: {exc.strerror or exc}") from None
        for device, ifindex, sock in new:
            self.taps.append(Tap(port, self.interface[port], device, ifindex, sock,
                                 engine=device != port.iface))
        self.counts[port].listened = self.describe(port)

    def _listening(self, port: Endpoint, device: str) -> bool:
        return any(t.port == port and t.device == device for t in self.taps)

    def describe(self, port: Endpoint) -> str:
        engine = [t for t in self.taps if t.port == port and t.engine]
        return f"{port.iface}" + (f", its egress at the impairment engine's {engine[0].device}"
                                  if engine else "")

    def _look_again(self, node: str) -> None:
        """After a node's link event: close taps whose device is gone, open engines' new TAPs."""
        netns = self.lab.runtime.netns_path(node)
        mine = [t for t in self.taps if t.port.node == node]

        def indexes() -> dict[str, int | None]:
            found: dict[str, int | None] = {}
            for tap in mine:
                try:
                    found[tap.device] = socket.if_nametoindex(tap.device)
                except OSError:
                    found[tap.device] = None
            return found
        now = call_in_netns(netns, indexes)
        for tap in mine:
            if now[tap.device] != tap.ifindex:
                self._close(tap)
        for port in self.interface:
            if port.node == node:
                with contextlib.suppress(LabError):  # the port itself is gone: nothing to add
                    self._open(port)

    def _close(self, tap: Tap) -> None:
        self.counts[tap.port].dropped += tap.dropped()
        tap.sock.close()
        self.taps.remove(tap)

    def _read(self, tap: Tap, room: int) -> int:
        """Up to `room` frames from one socket into `pending`; how many it took."""
        taken = 0
        while taken < min(room, READ_BATCH):
            try:
                length, ancillary, _, address = tap.sock.recvmsg_into(
                    [self.buffer], socket.CMSG_SPACE(TIMESPEC.size), socket.MSG_TRUNC)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.ENETDOWN:
                    continue  # the port went down; the socket hears it again once it is up
                if exc.errno in GONE:
                    self._close(tap)
                    break
                raise
            outgoing = address[2] == PACKET_OUTGOING
            if tap.engine and not outgoing:
                continue
            data = bytes(self.buffer[:min(length, self.snaplen)])
            heapq.heappush(self.pending, Frame(_stamp(ancillary), next(self.seq), tap.interface,
                                               data, length, OUTBOUND if outgoing else INBOUND))
            taken += 1
        return taken

    def _write(self, until_ns: int) -> None:
        """Every pending frame stamped before `until_ns`, oldest first."""
        ports = {i: p for p, i in self.interface.items()}
        while self.pending and self.pending[0].ns < until_ns:
            frame = heapq.heappop(self.pending)
            if frame.ns < self.written_ns:
                self.late += 1
            self.written_ns = max(self.written_ns, frame.ns)
            self.writer.packet(frame.interface, frame.ns, frame.data, frame.length,
                               frame.direction)
            self.counts[ports[frame.interface]].frames += 1
        self.out.flush()

    def run(self, *, count: int | None = None, seconds: float | None = None,
            stop: Callable[[], bool] = lambda: False) -> Summary:
        """Capture until `count` frames, `seconds`, `stop()` turning true (a signal, for the
        CLI) or the reader of `out` going away; then write what is pending and each port's
        statistics."""
        ends = None if seconds is None else time.monotonic() + seconds
        read, stopped_by = 0, "a signal"
        try:
            while True:
                if count is not None and read >= count:
                    stopped_by = f"{count} frames"
                    break
                if ends is not None and time.monotonic() >= ends:
                    stopped_by = f"{seconds:g} s"
                    break
                if stop():
                    break
                wait = POLL_S if ends is None else max(0.0, min(POLL_S, ends - time.monotonic()))
                ready, _, _ = select.select([*self.taps, *self.watches], [], [], wait)
                for watch in (r for r in ready if isinstance(r, LinkWatch)):
                    watch.drain()
                    self._look_again(watch.node)
                for tap in (r for r in ready if isinstance(r, Tap) and r in self.taps):
                    read += self._read(tap, room=count - read if count is not None else READ_BATCH)
                self._write(time.time_ns() - int(REORDER_S * 1e9))
        except BrokenPipeError:
            return self._summary("the reader went away")
        self._write(time.time_ns() + 1)
        ended = time.time_ns()
        for tap in list(self.taps):
            self._close(tap)
        for port, interface in self.interface.items():
            counted = self.counts[port]
            self.writer.statistics(interface, self.started_ns, ended, counted.frames,
                                   counted.dropped)
        self.out.flush()
        return self._summary(stopped_by)

    def _summary(self, stopped_by: str) -> Summary:
        return Summary(self.counts, self.late, stopped_by)

    def __enter__(self) -> Capture:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        for tap in list(self.taps):
            self._close(tap)
        for watch in self.watches:
            watch.sock.close()
        self.watches = []
