"""How the kernel backend's SRv6 objects reach this kernel: its own seg6 and seg6local, or,
where it has none (many cloud and VM kernels), the userspace engine fl-srv6.

Both take the same SAI objects. A SID list's next hop is, in the kernel, a nexthop object
with `encap seg6 mode encap|encap.red|inline`, or one via the engine's gateway for that list;
a my-SID entry is a `seg6local` route, or a route via the engine's my-SID gateway plus the
entry in the engine. Which one a switch uses is found by trying the kernel's once, in place
(`choose`), and said in the agent's status.

End.DT6 looks up the SAI table by number (seg6local `table`); End.DT4 and End.DT46 have only
the VRF form (`vrftable`), which the kernel resolves to a VRF device bound to that table, and
only in the VRF strict mode. So the kernel path needs VRF too; a kernel with seg6 but no VRF
takes the engine, which hands every decapsulated packet back to the kernel's lookup.
"""

from __future__ import annotations

import socket
import subprocess
from dataclasses import dataclass
from ipaddress import IPv6Address, ip_address
from pathlib import Path
from typing import Any, Protocol

from pyroute2.netlink.exceptions import NetlinkError

from harness.core.errors import LabError
from harness.linux.nsenter import netlink
from harness.linux.rtnl_messages import (
    LWTUNNEL_ENCAP_SEG6,
    pack_address,
    pack_seg6_encap,
    unpack_address,
    unpack_seg6_encap,
)
from harness.linux.vrf import strict_mode
from harness.nodes.switch.sai import srv6_engine
from harness.nodes.switch.sai.backend import MySidFound, SidListFound
from harness.nodes.switch.sai.records import MySidEntry, NextHop, Srv6SidList, looks_up
from harness.nodes.switch.sai.status import Status

RTPROT_SAI = 250
SID_DEVICE = "flsid"  # where the kernel path routes SIDs without a next hop
SID_VRF = "flvrf"  # the VRF device End.DT4 and End.DT46 look the SAI table up through
OWN_DEVICES = (SID_DEVICE, f"{SID_DEVICE}p", SID_VRF)  # none is a port: the agent skips them
PROBE_TABLE = 0xFFFE_0000  # no rule looks it up: trying seg6local there touches no traffic
_BEHAVIOR = {"SAI_MY_SID_ENTRY_ENDPOINT_BEHAVIOR_E": "End",
             "SAI_MY_SID_ENTRY_ENDPOINT_BEHAVIOR_X": "End.X",
             "SAI_MY_SID_ENTRY_ENDPOINT_BEHAVIOR_DT6": "End.DT6",
             "SAI_MY_SID_ENTRY_ENDPOINT_BEHAVIOR_DT4": "End.DT4",
             "SAI_MY_SID_ENTRY_ENDPOINT_BEHAVIOR_DT46": "End.DT46",
             "SAI_MY_SID_ENTRY_ENDPOINT_BEHAVIOR_DX6": "End.DX6",
             "SAI_MY_SID_ENTRY_ENDPOINT_BEHAVIOR_DX4": "End.DX4"}
_MODE = {"SAI_SRV6_SIDLIST_TYPE_ENCAPS": "encap", "SAI_SRV6_SIDLIST_TYPE_ENCAPS_RED": "encap.red",
         "SAI_SRV6_SIDLIST_TYPE_INSERT": "inline"}
_SAI_BEHAVIOR = {name: sai for sai, name in _BEHAVIOR.items()}
_SAI_TYPE = {mode: sai for sai, mode in _MODE.items()}
# seg6local.h's actions, for the behaviors SAI has here
_SEG6LOCAL_ACTIONS = {1: "End", 2: "End.X", 5: "End.DX6", 6: "End.DX4", 7: "End.DT6",
                      8: "End.DT4", 16: "End.DT46"}
LWTUNNEL_ENCAP_SEG6_LOCAL = 7


@dataclass(frozen=True)
class Srv6Setup:
    """Where a switch's SRv6 engine lives if it needs one, and which path to take: auto (the
    kernel's if it has seg6 and seg6local), kernel, or userspace."""

    directory: Path
    program: str
    path: str = "auto"


class Seg6(Protocol):
    name: str

    def next_hop_attrs(self, sid_list: int, sids: Srv6SidList, oif: int) -> list[tuple[str, Any]]:
        """The nexthop object's attributes (beyond its id) for a next hop into `sids`."""

    def forget_list(self, sid_list: int) -> None: ...

    def my_sid(self, sid: IPv6Address, entry: MySidEntry | None, hop: NextHop | None,
               oif: int) -> Status:
        """Program (entry) or remove (None) a my-SID entry; `hop`/`oif`: where End.X and
        End.DX* cross to."""

    def sid_list_of(self, msg: Any) -> SidListFound | None:
        """A dumped nexthop object read back as a next hop into a SID list, if it is one."""

    def my_sid_of(self, msg: Any) -> tuple[str, MySidFound] | None:
        """A dumped SAI-table route read back as a my-SID entry, if it is one."""

    def adopt_list(self, sid_list: int, handle: int) -> None: ...


class KernelSeg6:
    def __init__(self, netns_path: str | None, table: int) -> None:
        self.netns_path, self.table = netns_path, table
        self.name = "kernel seg6"
        self._source_set = False

    def next_hop_attrs(self, sid_list: int, sids: Srv6SidList, oif: int) -> list[tuple[str, Any]]:
        if not self._source_set:  # as the engine: the loopback, not the egress port's address
            argv = ["ip", "sr", "tunsrc", "set", str(encap_source(self.netns_path))]
            out = subprocess.run(["nsenter", f"--net={self.netns_path}", *argv]
                                 if self.netns_path else argv, capture_output=True, text=True)
            if out.returncode != 0:
                raise LabError(f"`{' '.join(argv)}` failed: {out.stderr.strip()}")
            self._source_set = True
        return [("NHA_OIF", oif), ("NHA_ENCAP_TYPE", LWTUNNEL_ENCAP_SEG6),
                ("NHA_ENCAP_NESTED", pack_seg6_encap(sids.segment_list, sids.type))]

    def forget_list(self, sid_list: int) -> None:
        pass  # the kernel holds the list only in the nexthops using it

    @staticmethod
    def _sid_device(ip: Any) -> int:
        """The device every SID is routed on. Not lo: the kernel makes a route via the
        loopback a reject route, which drops what End and End.DT6 should process; not a port
        either, even for End.X: the kernel deletes a port's routes when it goes down and never
        puts them back (an End.X would stay lost after its link returned), and End.X finds its
        port by looking its next hop up anyway. A veth pair of the switch's own, always up
        (dummy devices are not in every kernel)."""
        found = ip.link_lookup(ifname=SID_DEVICE)
        if not found:
            ip.link("add", ifname=SID_DEVICE, kind="veth", peer=f"{SID_DEVICE}p")
            found = ip.link_lookup(ifname=SID_DEVICE)
            for name in (SID_DEVICE, f"{SID_DEVICE}p"):
                quiet_up(ip, ip.link_lookup(ifname=name)[0])
        return found[0]

    def adopt_list(self, sid_list: int, handle: int) -> None:
        pass

    def sid_list_of(self, msg: Any) -> SidListFound | None:
        encap = msg.get_attr("NHA_ENCAP") or msg.get_attr("NHA_ENCAP_NESTED")
        if msg.get_attr("NHA_ENCAP_TYPE") != LWTUNNEL_ENCAP_SEG6 or not encap:
            return None
        segments, sid_list_type = unpack_seg6_encap(encap)
        return SidListFound(tuple(str(s) for s in segments), sid_list_type,
                            msg.get_attr("NHA_OIF"), 0)

    def my_sid_of(self, msg: Any) -> tuple[str, MySidFound] | None:
        if msg.get_attr("RTA_ENCAP_TYPE") != LWTUNNEL_ENCAP_SEG6_LOCAL:
            return None
        encap = msg.get_attr("RTA_ENCAP")
        action = _SEG6LOCAL_ACTIONS.get(encap.get_attr("SEG6_LOCAL_ACTION"))
        if action is None:
            return None
        via = encap.get_attr("SEG6_LOCAL_NH6") or encap.get_attr("SEG6_LOCAL_NH4")
        crosses_to = (str(via), msg.get_attr("RTA_OIF")) if action in ("End.X", "End.DX6",
                                                                     "End.DX4") else None
        return msg.get_attr("RTA_DST"), MySidFound(_SAI_BEHAVIOR[action], crosses_to)

    def my_sid(self, sid: IPv6Address, entry: MySidEntry | None, hop: NextHop | None,
               oif: int) -> Status:
        with netlink(self.netns_path) as ip:
            if entry is None:
                ip.route("del", dst=f"{sid}/128", table=self.table)
                return Status.SUCCESS
            encap: dict[str, Any] = {"type": "seg6local",
                                     "action": _BEHAVIOR[entry.endpoint_behavior]}
            if hop is not None:  # the kernel looks the next hop up itself (the port's route)
                encap["nh4" if hop.ip.version == 4 else "nh6"] = str(hop.ip)
            if entry.endpoint_behavior.endswith("_DT6"):
                encap["table"] = self.table
            elif looks_up(entry.endpoint_behavior):
                lookup_vrf(ip, self.netns_path, self.table)
                encap["vrf_table"] = self.table
            ip.route("replace", dst=f"{sid}/128", table=self.table, proto=RTPROT_SAI,
                     oif=self._sid_device(ip), encap=encap)
        return Status.SUCCESS


class UserspaceSeg6:
    """The engine, started on first use (a switch without SRv6 runs none)."""

    def __init__(self, netns_path: str | None, table: int, setup: Srv6Setup, why: str) -> None:
        self.netns_path, self.table, self.setup = netns_path, table, setup
        self.engine = srv6_engine.Engine(setup.directory)
        self.name = f"userspace ({srv6_engine.ENGINE}): {why}"
        self.indexes: dict[int, int] = {}  # SID list oid -> the engine's list index
        self._tap: int | None = None
        self._found: srv6_engine.Shown | None = None  # what a warm start read back

    def _tap_index(self) -> int:
        if self._tap is not None:
            return self._tap
        self.engine.run(self.setup.program, encap_source(self.netns_path), self.netns_path)
        with netlink(self.netns_path) as ip:
            index = ip.link_lookup(ifname=srv6_engine.TAP)[0]
            quiet_up(ip, index)
            self._neighbour(ip, index, srv6_engine.MY_SID_INDEX)
        self._tap = index
        return index

    @staticmethod
    def _neighbour(ip: Any, tap: int, index: int) -> None:
        ip.neigh("replace", dst=str(srv6_engine.gateway(index)), ifindex=tap,
                 lladdr=srv6_engine.mac(index), state=0x80)  # NUD_PERMANENT

    def next_hop_attrs(self, sid_list: int, sids: Srv6SidList, oif: int) -> list[tuple[str, Any]]:
        tap = self._tap_index()
        index = self.indexes.get(sid_list)
        if index is None:
            used = set(self.indexes.values())
            index = next(i for i in range(1, srv6_engine.MAX_LISTS + 1) if i not in used)
        segments = ",".join(str(s) for s in sids.segment_list)
        self.engine.command(f"list {index} {_MODE[sids.type]} {segments} {oif}")
        self.indexes[sid_list] = index
        with netlink(self.netns_path) as ip:
            self._neighbour(ip, tap, index)
        return [("NHA_OIF", tap), ("NHA_GATEWAY", pack_address(str(srv6_engine.gateway(index))))]

    def forget_list(self, sid_list: int) -> None:
        index = self.indexes.pop(sid_list, None)
        if index is not None:
            self.engine.command(f"nolist {index}")

    def adopt_list(self, sid_list: int, handle: int) -> None:
        self.indexes[sid_list] = handle

    def _shown(self) -> srv6_engine.Shown:
        """The running engine's tables (empty when none runs: then the kernel lost the
        routes into its TAP too, with the TAP)."""
        if self._found is None:
            self._found = self.engine.show() if self.engine.answers() else srv6_engine.Shown()
        return self._found

    def sid_list_of(self, msg: Any) -> SidListFound | None:
        gateway = msg.get_attr("NHA_GATEWAY")
        index = _engine_index(unpack_address(gateway)) if gateway else None
        listed = self._shown().lists.get(index) if index else None
        if listed is None:
            return None
        return SidListFound(tuple(str(listed["segs"]).split(",")), _SAI_TYPE[str(listed["mode"])],
                            int(listed["port"]), index)  # type: ignore[arg-type]

    def my_sid_of(self, msg: Any) -> tuple[str, MySidFound] | None:
        gateway = msg.get_attr("RTA_GATEWAY")
        if gateway is None or _engine_index(gateway) != srv6_engine.MY_SID_INDEX:
            return None
        sid = msg.get_attr("RTA_DST")
        shown = self._shown().sids.get(str(IPv6Address(sid)))
        if shown is None:
            return None
        crosses_to = (str(shown["nexthop"]), int(shown["oif"])) if "nexthop" in shown else None
        return sid, MySidFound(_SAI_BEHAVIOR[str(shown["behavior"])], crosses_to)

    def my_sid(self, sid: IPv6Address, entry: MySidEntry | None, hop: NextHop | None,
               oif: int) -> Status:
        tap = self._tap_index()
        with netlink(self.netns_path) as ip:
            if entry is None:
                ip.route("del", dst=f"{sid}/128", table=self.table)
                self.engine.command(f"nosid {sid}")
                return Status.SUCCESS
            crossing = f" {hop.ip} {oif}" if hop is not None else ""
            self.engine.command(f"sid {sid} {_BEHAVIOR[entry.endpoint_behavior]}{crossing}")
            ip.route("replace", dst=f"{sid}/128", table=self.table, proto=RTPROT_SAI, oif=tap,
                     gateway=str(srv6_engine.gateway(srv6_engine.MY_SID_INDEX)))
        return Status.SUCCESS


def quiet_up(ip: Any, index: int) -> None:
    """A device of the dataplane's own up, without an IPv6 link-local address (so no DAD,
    router solicitation or MLD from it): addrgenmode none, over netlink, since a
    container's /proc/sys is read-only."""
    ip.link("set", index=index, IFLA_AF_SPEC={"attrs": [("AF_INET6", {"attrs": [
        ("IFLA_INET6_ADDR_GEN_MODE", 1)]})]})
    ip.link("set", index=index, state="up")


def lookup_vrf(ip: Any, netns_path: str | None, table: int) -> None:
    """The VRF device bound to `table` that End.DT4 and End.DT46 look up through, with the
    namespace's VRF strict mode on (without it the kernel finds no VRF by its table). No port
    is enslaved to it: the SAI table stays every port's, as before."""
    if not ip.link_lookup(ifname=SID_VRF):
        ip.link("add", ifname=SID_VRF, kind="vrf", vrf_table=table)
        quiet_up(ip, ip.link_lookup(ifname=SID_VRF)[0])
    strict_mode(netns_path)


def encap_source(netns_path: str | None) -> IPv6Address:
    """The encapsulations' outer source: the loopback's global IPv6 address, as SRv6 routers
    use (else the switch's first global one)."""
    with netlink(netns_path) as ip:
        found = [(a["index"], a.get_attr("IFA_ADDRESS")) for a in ip.get_addr(
            family=socket.AF_INET6) if a["scope"] == 0]
        lo = ip.link_lookup(ifname="lo")
    ordered = sorted(found, key=lambda item: item[0] not in lo)
    if not ordered:
        raise LabError("SRv6 needs a global IPv6 address on the switch (its loopback's is the "
                       "encapsulations' source)")
    return IPv6Address(ordered[0][1])


def _engine_index(gateway: str) -> int | None:
    """The engine's index a next hop's gateway names (srv6_engine.gateway), else None."""
    address = ip_address(gateway)
    index = int(address) - int(srv6_engine.gateway(0))
    return index if address.version == 6 and 0 <= index <= srv6_engine.MAX_LISTS else None


def kernel_refuses(netns_path: str | None, table: int) -> str | None:
    """Why this kernel cannot hold SRv6 objects (None if it can): a seg6local End, a seg6
    encapsulation and a seg6local End.DT4 (through the switch's VRF device) are added where
    nothing uses them, and removed."""
    probe = IPv6Address("fe80::53:ffff")
    encaps = [({"type": "seg6local", "action": "End"}, "seg6local"),
              ({"type": "seg6", "mode": "encap", "segs": str(probe)}, "seg6"),
              ({"type": "seg6local", "action": "End.DT4", "vrf_table": table},
               "End.DT4 through a VRF")]
    with netlink(netns_path) as ip:
        lo = ip.link_lookup(ifname="lo")[0]
        for encap, what in encaps:
            try:
                if encap.get("vrf_table"):
                    lookup_vrf(ip, netns_path, table)
                ip.route("add", dst=f"{probe}/128", table=PROBE_TABLE, oif=lo, encap=encap)
                ip.route("del", dst=f"{probe}/128", table=PROBE_TABLE)
            except (NetlinkError, OSError) as exc:
                detail = exc.args[1] if isinstance(exc, NetlinkError) and len(exc.args) > 1 \
                    else exc
                return f"the kernel refuses {what} ({detail})"
    return None


def choose(netns_path: str | None, table: int, setup: Srv6Setup | None) -> Seg6:
    """The kernel's seg6 where it works (or is asked for), else the engine."""
    if setup is None or setup.path == "kernel":
        return KernelSeg6(netns_path, table)
    why = "asked for" if setup.path == "userspace" else kernel_refuses(netns_path, table)
    return KernelSeg6(netns_path, table) if why is None else \
        UserspaceSeg6(netns_path, table, setup, why)
