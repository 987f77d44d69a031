"""The configuration channel without a kernel: documents in, SAI calls on the fake backend out.

A warm restart is a second switch over a Discovery built from what the first one left in its
"hardware", as the kernel backend's discover() reads it back."""

from __future__ import annotations

import json
from ipaddress import ip_address
from pathlib import Path
from typing import Any

import pytest

from harness.nodes.switch.agent.config import ConfigError, ConfigOrch, parse, read
from harness.nodes.switch.agent.orch import RouteOrch
from harness.nodes.switch.sai.api import SaiSwitch
from harness.nodes.switch.sai.backend import Discovery, MySidFound, SidListFound
from harness.nodes.switch.sai.fake import FakeBackend
from harness.nodes.switch.sai.records import (
    MySidEntry,
    NextHop,
    NextHopGroupMember,
    RouteEntry,
    Srv6SidList,
)
from harness.nodes.switch.sai.types import IpPrefix, MySidKey, ObjectType, RouteKey
from tests.unit.test_agent import ETH1, ETH2, ecmp, route

T = ObjectType
SRC = "nodes/leaf1/sai-config.json"
POOL = {"SAI_BUFFER_POOL_ATTR_TYPE": "SAI_BUFFER_POOL_TYPE_INGRESS",
        "SAI_BUFFER_POOL_ATTR_SIZE": 1_000_000}
PROFILE = {"SAI_BUFFER_PROFILE_ATTR_POOL_ID": "BUFFER_POOL|ingress",
           "SAI_BUFFER_PROFILE_ATTR_RESERVED_BUFFER_SIZE": 10_000,
           "SAI_BUFFER_PROFILE_ATTR_XOFF_TH": 50_000}
VIA_ETH1 = {"SAI_NEXT_HOP_ATTR_TYPE": "SAI_NEXT_HOP_TYPE_IP", "SAI_NEXT_HOP_ATTR_IP": "10.1.0.1",
            "SAI_NEXT_HOP_ATTR_ROUTER_INTERFACE_ID": "ROUTER_INTERFACE|eth1"}
VIA_ETH2 = {**VIA_ETH1, "SAI_NEXT_HOP_ATTR_IP": "10.1.0.3",
            "SAI_NEXT_HOP_ATTR_ROUTER_INTERFACE_ID": "ROUTER_INTERFACE|eth2"}
DOCUMENT = {
    "PORT|eth1": {"SAI_PORT_ATTR_SPEED": 400_000},
    "BUFFER_POOL|ingress": POOL,
    "BUFFER_PROFILE|lossless": PROFILE,
    "INGRESS_PRIORITY_GROUP|eth1-3": {"SAI_INGRESS_PRIORITY_GROUP_ATTR_PORT": "PORT|eth1",
                                      "SAI_INGRESS_PRIORITY_GROUP_ATTR_INDEX": 3,
                                      "SAI_INGRESS_PRIORITY_GROUP_ATTR_BUFFER_PROFILE":
                                          "BUFFER_PROFILE|lossless"},
    "QOS_MAP|rdma": {"SAI_QOS_MAP_ATTR_TYPE": "SAI_QOS_MAP_TYPE_DSCP_TO_TC",
                     "SAI_QOS_MAP_ATTR_MAP_TO_VALUE_LIST": [[26, 3], [48, 6]]},
    "NEXT_HOP|te": VIA_ETH1,
    "ROUTE_ENTRY|10.99.0.0/24": {"SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID": "NEXT_HOP|te"},
}


class Switch:
    """A switch with two ports, its route orchestrator and its configuration channel, as the
    agent boots them (harness/nodes/switch/agent/main.py)."""

    def __init__(self, discovery: Discovery | None = None) -> None:
        self.backend = FakeBackend(discovery)
        self.sai = SaiSwitch(self.backend, attrs={"SAI_SWITCH_ATTR_INIT_SWITCH": True,
                                                  "SAI_SWITCH_ATTR_RESTART_WARM": True})
        self.routes = RouteOrch(self.sai)
        self.config = ConfigOrch(self.sai, self.routes,
                                 bound={"VIRTUAL_ROUTER|default": self.sai.default_vr})
        for name, lane in (("eth1", ETH1), ("eth2", ETH2)):
            _, port = self.sai.create(T.PORT, {"SAI_PORT_ATTR_HW_LANE_LIST": [lane]})
            _, rif = self.sai.create(T.ROUTER_INTERFACE, {
                "SAI_ROUTER_INTERFACE_ATTR_VIRTUAL_ROUTER_ID": self.sai.default_vr,
                "SAI_ROUTER_INTERFACE_ATTR_TYPE": "SAI_ROUTER_INTERFACE_TYPE_PORT",
                "SAI_ROUTER_INTERFACE_ATTR_PORT_ID": port})
            self.routes.rif_by_ifindex[lane] = rif  # type: ignore[assignment]
            self.config.bound[f"PORT|{name}"] = port  # type: ignore[assignment]
            self.config.bound[f"ROUTER_INTERFACE|{name}"] = rif  # type: ignore[assignment]

    def boot(self, document: dict[str, Any]) -> list[str]:
        self.sai.warm_adopt()
        entries = self.parse(document)
        self.routes.adopt(foreign=self.config.claim(entries))

        return [str(c) for c in self.config.apply(entries)]

    def parse(self, document: dict[str, Any]) -> dict:
        return parse(json.dumps(document, indent=1), SRC, set(self.config.bound))

    def apply(self, document: dict[str, Any], dry_run: bool = False) -> list[str]:
        return [str(c) for c in self.config.apply(self.parse(document), dry_run=dry_run)]

    def route(self, prefix: str) -> RouteEntry:
        record = self.sai.record(RouteKey(self.sai.default_vr, IpPrefix.parse(prefix)))
        assert isinstance(record, RouteEntry)
        return record

    def next_hop_ip(self, prefix: str) -> str:
        hop = self.sai.record(self.route(prefix).next_hop_id)
        assert isinstance(hop, NextHop)
        return str(hop.ip)

    def discovery(self) -> Discovery:
        """What the kernel backend would read back: next hops, groups and routes (no pools,
        profiles or maps: the kernel has none)."""
        found, lanes = Discovery(), {ETH1: ETH1, ETH2: ETH2}
        rif_lane = {rif: lane for lane, rif in self.routes.rif_by_ifindex.items()}
        for oid, hop in self.sai.objects(T.NEXT_HOP).items():
            assert isinstance(hop, NextHop)
            lane = lanes[rif_lane[hop.router_interface_id]]
            sids = self.sai.record(hop.srv6_sidlist_id) if hop.srv6_sidlist_id else None
            if isinstance(sids, Srv6SidList):
                found.sid_lists[oid] = SidListFound(tuple(map(str, sids.segment_list)),
                                                    sids.type, lane, 0)
            else:
                found.next_hops[oid] = (str(hop.ip), lane)
        for key, sid in self.sai.objects(T.MY_SID_ENTRY).items():
            assert isinstance(key, MySidKey) and isinstance(sid, MySidEntry)
            hop = self.sai.record(sid.next_hop_id) if sid.next_hop_id else None
            found.my_sids[str(key.sid)] = MySidFound(sid.endpoint_behavior, (
                str(hop.ip), lanes[rif_lane[hop.router_interface_id]])  # type: ignore[union-attr]
                if hop else None)
        for group in self.sai.objects(T.NEXT_HOP_GROUP):
            found.groups[group] = [(m.next_hop_id, m.weight)  # type: ignore[misc]
                                   for m in self.sai.members(group).values()]
        for key, entry in self.sai.objects(T.ROUTE_ENTRY).items():
            assert isinstance(key, RouteKey) and isinstance(entry, RouteEntry)
            found.routes[str(key.destination)] = ("nh", entry.next_hop_id)
        return found


@pytest.fixture
def switch() -> Switch:
    return Switch()


def test_a_document_is_applied_in_dependency_order_and_again_changes_nothing(switch) -> None:
    changes = switch.apply(DOCUMENT)
    order = [c.split()[1] for c in changes if c.startswith("create")]
    assert order.index("BUFFER_POOL|ingress") < order.index("BUFFER_PROFILE|lossless") \
        < order.index("INGRESS_PRIORITY_GROUP|eth1-3")
    assert order.index("NEXT_HOP|te") < order.index("ROUTE_ENTRY|10.99.0.0/24")
    assert "set PORT|eth1 SAI_PORT_ATTR_SPEED=400000 -> SAI_STATUS_SUCCESS" in changes
    assert not switch.config.failed
    assert switch.next_hop_ip("10.99.0.0/24") == "10.1.0.1"
    port = switch.sai.record(switch.config.bound["PORT|eth1"])
    assert port.speed == 400_000  # type: ignore[union-attr]
    calls = len(switch.backend.calls)
    assert switch.apply(DOCUMENT) == [] and len(switch.backend.calls) == calls


def test_a_dry_run_says_what_would_change_and_changes_nothing(switch) -> None:
    switch.apply(DOCUMENT)
    calls = len(switch.backend.calls)
    changed = {**DOCUMENT, "NEXT_HOP|te": VIA_ETH2}
    planned = switch.apply(changed, dry_run=True)
    assert planned[0].startswith("create NEXT_HOP|te") and "->" not in planned[0]
    assert any(p.startswith("set ROUTE_ENTRY|10.99.0.0/24") for p in planned)
    assert planned[-1].startswith("remove NEXT_HOP|te")
    assert len(switch.backend.calls) == calls
    assert switch.next_hop_ip("10.99.0.0/24") == "10.1.0.1"


def test_a_settable_change_is_a_set_and_a_create_only_change_a_replacement(switch) -> None:
    switch.apply(DOCUMENT)
    old_pool = switch.config.refs["BUFFER_POOL|ingress"]
    bigger = {**DOCUMENT, "BUFFER_POOL|ingress": {**POOL, "SAI_BUFFER_POOL_ATTR_SIZE": 2_000_000}}
    assert switch.apply(bigger) == [
        "set BUFFER_POOL|ingress SAI_BUFFER_POOL_ATTR_SIZE=2000000 -> SAI_STATUS_SUCCESS"]
    static = {**bigger, "BUFFER_POOL|ingress": {
        **bigger["BUFFER_POOL|ingress"],
        "SAI_BUFFER_POOL_ATTR_THRESHOLD_MODE": "SAI_BUFFER_POOL_THRESHOLD_MODE_STATIC"}}
    changes = switch.apply(static)
    new_pool = switch.config.refs["BUFFER_POOL|ingress"]
    assert new_pool != old_pool and switch.sai.record(old_pool) is None
    profile = switch.sai.record(switch.config.refs["BUFFER_PROFILE|lossless"])
    assert profile.pool_id == new_pool  # type: ignore[union-attr]
    assert changes[0].startswith("create BUFFER_POOL|ingress")
    assert changes[-1].startswith("remove BUFFER_POOL|ingress the object it replaced")
    assert not switch.config.failed


def test_dropped_entries_go_referrers_first_and_ports_get_their_boot_values_back(switch) -> None:
    switch.apply(DOCUMENT)
    changes = switch.apply({"NEXT_HOP|te": VIA_ETH1})
    removed = [c.split()[1] for c in changes if c.startswith("remove")]
    assert removed.index("INGRESS_PRIORITY_GROUP|eth1-3") < removed.index(
        "BUFFER_PROFILE|lossless") < removed.index("BUFFER_POOL|ingress")
    assert removed.index("ROUTE_ENTRY|10.99.0.0/24") < len(removed)
    assert switch.sai.count(T.BUFFER_POOL) == switch.sai.count(T.QOS_MAP) == 0
    port = switch.sai.record(switch.config.bound["PORT|eth1"])
    assert port.speed == 100_000  # type: ignore[union-attr]
    assert set(switch.config.applied) == {"NEXT_HOP|te"} and not switch.config.failed


def test_a_configured_route_wins_over_zebra_and_hands_the_prefix_back(switch) -> None:
    """The precedence rule (agent/orch.py): the configuration owns its prefix; zebra's route
    is kept and programmed again, with no gap, when the configuration lets it go."""
    ecmp(switch.routes, route("10.99.0.0/24", 3))  # zebra: ECMP over both ports
    assert switch.sai.count(T.NEXT_HOP_GROUP) == 1
    changes = switch.apply({"NEXT_HOP|te": VIA_ETH2,
                            "ROUTE_ENTRY|10.99.0.0/24": {
                                "SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID": "NEXT_HOP|te"}})
    assert "create ROUTE_ENTRY|10.99.0.0/24 (over zebra's route) -> SAI_STATUS_SUCCESS" in changes
    assert switch.next_hop_ip("10.99.0.0/24") == "10.1.0.3"
    assert switch.sai.count(T.NEXT_HOP_GROUP) == 0  # zebra's group, unused, collected
    ecmp(switch.routes, route("10.99.0.0/24", 1))  # zebra's next word on the prefix
    assert switch.next_hop_ip("10.99.0.0/24") == "10.1.0.3"
    assert switch.routes.overridden == 1
    switch.apply({})
    assert switch.next_hop_ip("10.99.0.0/24") == "10.1.0.1"  # zebra's latest: via nh 1
    assert "remove" not in {api for api, ref in switch.backend.calls[-3:]
                            if isinstance(ref, RouteKey)}
    switch.apply({"ROUTE_ENTRY|10.98.0.0/24": {
        "SAI_ROUTE_ENTRY_ATTR_PACKET_ACTION": "SAI_PACKET_ACTION_DROP"}})
    assert switch.route("10.98.0.0/24").packet_action == "SAI_PACKET_ACTION_DROP"
    switch.apply({})  # zebra never had it: it goes
    assert switch.sai.record(RouteKey(switch.sai.default_vr,
                                      IpPrefix.parse("10.98.0.0/24"))) is None


def test_a_warm_restart_claims_what_the_kernel_kept_and_writes_nothing_to_it(switch) -> None:
    """zebra and the configuration both reach 10.1.0.1 on eth1: two alike next hops. After
    the restart each side gets its own back (the configured route's next hop is the hint),
    nothing that lives in the kernel is written, and the SAI-only objects are there again."""
    ecmp(switch.routes, route("10.0.0.5/32", 1), route("10.0.0.4/32", 3))
    switch.apply(DOCUMENT)
    before = {str(k.destination): (switch.next_hop_ip(str(k.destination)))
              for k in switch.sai.objects(T.ROUTE_ENTRY) if isinstance(k, RouteKey)
              and str(k.destination) != "10.0.0.4/32"}
    fresh = Switch(switch.discovery())
    changes = fresh.boot(DOCUMENT)
    kernel_calls = [(api, ref) for api, ref in fresh.backend.calls
                    if isinstance(ref, RouteKey) or (isinstance(ref, int) and ref >> 48 in (
                        T.NEXT_HOP, T.NEXT_HOP_GROUP, T.NEXT_HOP_GROUP_MEMBER))]
    assert kernel_calls == []
    assert sorted(c.split()[1] for c in changes if c.startswith("create")) == [
        "BUFFER_POOL|ingress", "BUFFER_PROFILE|lossless", "INGRESS_PRIORITY_GROUP|eth1-3",
        "QOS_MAP|rdma", "ROUTE_ENTRY|10.99.0.0/24"]
    configured = fresh.config.refs["NEXT_HOP|te"]
    assert fresh.route("10.99.0.0/24").next_hop_id == configured
    assert configured not in fresh.routes.next_hops.values()  # zebra's own is another
    assert fresh.routes.next_hops[("10.1.0.1", fresh.routes.rif_by_ifindex[ETH1])] != configured
    assert {p: fresh.next_hop_ip(p) for p in before} == before
    # zebra's replay confirms its routes; the configured prefix is not stale, nothing swept
    ecmp(fresh.routes, route("10.0.0.5/32", 1), route("10.0.0.4/32", 3))
    assert fresh.routes.sweep_stale() == 0
    assert fresh.apply(DOCUMENT) == []


def test_a_warm_restart_after_the_document_changed_applies_the_new_one(switch) -> None:
    switch.apply(DOCUMENT)
    fresh = Switch(switch.discovery())
    moved = {**DOCUMENT, "NEXT_HOP|te": VIA_ETH2}
    fresh.boot(moved)
    assert fresh.next_hop_ip("10.99.0.0/24") == "10.1.0.3"
    fresh.routes.sweep_stale()
    fresh.routes.collect_garbage()
    hops = [h for h in fresh.sai.objects(T.NEXT_HOP).values() if isinstance(h, NextHop)]
    assert [str(h.ip) for h in hops] == ["10.1.0.3"]  # the old configured one swept
    assert not any(isinstance(m, NextHopGroupMember)
                   for m in fresh.sai.objects(T.NEXT_HOP_GROUP_MEMBER).values())


SRV6 = {
    "SRV6_SIDLIST|to-r3": {"SAI_SRV6_SIDLIST_ATTR_TYPE": "SAI_SRV6_SIDLIST_TYPE_ENCAPS",
                           "SAI_SRV6_SIDLIST_ATTR_SEGMENT_LIST": ["fcbb:bbbb:2::e",
                                                                 "fcbb:bbbb:3::d6"]},
    "NEXT_HOP|te-r3": {"SAI_NEXT_HOP_ATTR_TYPE": "SAI_NEXT_HOP_TYPE_SRV6_SIDLIST",
                       "SAI_NEXT_HOP_ATTR_SRV6_SIDLIST_ID": "SRV6_SIDLIST|to-r3",
                       "SAI_NEXT_HOP_ATTR_ROUTER_INTERFACE_ID": "ROUTER_INTERFACE|eth1"},
    "ROUTE_ENTRY|fd00:b::/64": {"SAI_ROUTE_ENTRY_ATTR_NEXT_HOP_ID": "NEXT_HOP|te-r3"},
    "NEXT_HOP|adj-eth2": VIA_ETH2,
    "MY_SID_ENTRY|fcbb:bbbb:1::e2": {
        "SAI_MY_SID_ENTRY_ATTR_ENDPOINT_BEHAVIOR": "SAI_MY_SID_ENTRY_ENDPOINT_BEHAVIOR_X",
        "SAI_MY_SID_ENTRY_ATTR_NEXT_HOP_ID": "NEXT_HOP|adj-eth2"},
    "MY_SID_ENTRY|fcbb:bbbb:1::": {
        "SAI_MY_SID_ENTRY_ATTR_ENDPOINT_BEHAVIOR": "SAI_MY_SID_ENTRY_ENDPOINT_BEHAVIOR_E"},
}


def test_a_warm_restart_claims_the_srv6_objects_and_writes_nothing(switch) -> None:
    switch.apply(SRV6)
    fresh = Switch(switch.discovery())
    ports = len(fresh.backend.calls)
    # the configured route is pinned again over whatever zebra may send; nothing else moves
    assert fresh.boot(SRV6) == ["create ROUTE_ENTRY|fd00:b::/64 -> SAI_STATUS_SUCCESS"]
    assert fresh.backend.calls[ports:] == []  # nothing reached the hardware
    assert fresh.apply(SRV6) == []


def test_srv6_objects_the_document_dropped_while_down_are_removed(switch) -> None:
    """A restart must not orphan SRv6 state: what the new document no longer declares goes,
    the SID at boot, the next hop and SID list once the stale route is swept."""
    switch.apply(SRV6)
    fresh = Switch(switch.discovery())
    kept = {k: v for k, v in SRV6.items() if k in ("NEXT_HOP|adj-eth2",
                                                   "MY_SID_ENTRY|fcbb:bbbb:1::e2")}
    fresh.boot(kept)
    assert [str(k.sid) for k in fresh.sai.objects(T.MY_SID_ENTRY)] == ["fcbb:bbbb:1::e2"]
    assert fresh.sai.count(T.SRV6_SIDLIST) == 1  # its stale route still points at it
    assert fresh.routes.sweep_stale() == 1  # zebra never had fd00:b::/64
    assert fresh.config.collect() == 2
    assert fresh.sai.count(T.SRV6_SIDLIST) == 0
    assert [str(h.ip) for h in fresh.sai.objects(T.NEXT_HOP).values()] == ["10.1.0.3"]


def test_a_failed_create_leaves_its_dependents_waiting_and_the_next_apply_retries(switch) -> None:
    switch.sai.faults.add("create", "BUFFER_POOL", 1.0)
    changes = switch.apply(DOCUMENT)
    assert "BUFFER_POOL|ingress" in switch.config.failed
    assert "points at BUFFER_POOL|ingress" in switch.config.failed["BUFFER_PROFILE|lossless"]
    assert any(c.startswith("skip INGRESS_PRIORITY_GROUP|eth1-3") for c in changes)
    assert switch.next_hop_ip("10.99.0.0/24") == "10.1.0.1"  # the rest went in
    switch.sai.faults.clear()
    switch.apply(DOCUMENT)
    assert not switch.config.failed and switch.sai.count(T.INGRESS_PRIORITY_GROUP) == 1


@pytest.mark.parametrize(("document", "where", "says"), [
    ('{"PORT|eth1": {"SAI_PORT_ATTR_SPEED": 400000},\n "BUFFER_POOL|x": [}', ":2:",
     "not JSON"),
    ('{"PORTS|eth1": {}}', ":1: PORTS|eth1:", "TYPE is one of PORT, ROUTER_INTERFACE"),
    ('{"NEIGHBOR_ENTRY|x": {}}', ":1:", "configurable TYPE"),
    ('{\n "PORT|eth1": {\n  "SAI_PORT_ATTR_SPED": 1}}', ":3: PORT|eth1 SAI_PORT_ATTR_SPED:",
     "did you mean SAI_PORT_ATTR_SPEED?"),
    ('{"PORT|eth1": {"SAI_PORT_ATTR_SPEED": "fast"}}', "SAI_PORT_ATTR_SPEED",
     "not an integer"),
    ('{"PORT|eth1": {"SAI_PORT_ATTR_HW_LANE_LIST": [5]}}', "SAI_PORT_ATTR_HW_LANE_LIST",
     "create-only"),
    ('{"PORT|eth9": {"SAI_PORT_ATTR_SPEED": 1000}}', "PORT|eth9", "name one of PORT|eth1"),
    ('{"NEXT_HOP|a": {"SAI_NEXT_HOP_ATTR_TYPE": "SAI_NEXT_HOP_TYPE_IP", "SAI_NEXT_HOP_ATTR_IP":'
     ' "10.0.0.1", "SAI_NEXT_HOP_ATTR_ROUTER_INTERFACE_ID": "ROUTER_INTERFACE|eht1"}}',
     "SAI_NEXT_HOP_ATTR_ROUTER_INTERFACE_ID", "did you mean 'ROUTER_INTERFACE|eth1'?"),
    ('{"NEXT_HOP|a": {"SAI_NEXT_HOP_ATTR_TYPE": "SAI_NEXT_HOP_TYPE_IP", "SAI_NEXT_HOP_ATTR_IP":'
     ' "10.0.0.1", "SAI_NEXT_HOP_ATTR_ROUTER_INTERFACE_ID": "PORT|eth1"}}',
     "ROUTER_INTERFACE_ID", "is not a ROUTER_INTERFACE"),
    ('{"NEXT_HOP|a": {"SAI_NEXT_HOP_ATTR_TYPE": "SAI_NEXT_HOP_TYPE_IP"}}', "NEXT_HOP|a",
     "a next hop needs SAI_NEXT_HOP_ATTR_ROUTER_INTERFACE_ID"),
    ('{"ROUTE_ENTRY|10.99.0.1/24": {"SAI_ROUTE_ENTRY_ATTR_PACKET_ACTION": '
     '"SAI_PACKET_ACTION_DROP"}}', "ROUTE_ENTRY|10.99.0.1/24", "has host bits set"),
    ('{"BUFFER_PROFILE|a": {"SAI_BUFFER_PROFILE_ATTR_POOL_ID": "BUFFER_PROFILE|b"},'
     ' "BUFFER_PROFILE|b": {"SAI_BUFFER_PROFILE_ATTR_POOL_ID": "BUFFER_PROFILE|a"}}',
     "BUFFER_PROFILE", "is not a BUFFER_POOL"),
])
def test_a_bad_document_is_refused_whole_naming_line_key_and_fix(
        switch, document: str, where: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(document, SRC, set(switch.config.bound))
    message = str(caught.value)
    assert message.startswith(SRC) and where in message and says in message, message


def test_no_document_is_an_empty_one(tmp_path: Path) -> None:
    assert read(tmp_path / "absent.json", set()) == ({}, "{}")


def test_a_refused_document_changes_nothing(switch) -> None:
    switch.apply(DOCUMENT)
    calls = len(switch.backend.calls)
    with pytest.raises(ConfigError):
        switch.apply({**DOCUMENT, "QOS_MAP|rdma": {"SAI_QOS_MAP_ATTR_TYPE": "bogus"}})
    assert len(switch.backend.calls) == calls
    assert str(ip_address("10.1.0.1")) == switch.next_hop_ip("10.99.0.0/24")


def test_a_restart_never_claims_a_next_hop_zebra_uses_for_one_no_route_names(switch) -> None:
    """The document declares a next hop alike to one in zebra's ECMP group, and no route
    uses it (the route was dropped): after a restart the configuration must not take
    zebra's, which its group still uses; it makes its own."""
    ecmp(switch.routes, route("10.0.0.4/32", 3))  # zebra's group holds 10.1.0.1 on eth1
    only_hop = {"NEXT_HOP|te": VIA_ETH1}
    switch.apply(only_hop)
    fresh = Switch(switch.discovery())
    fresh.boot(only_hop)
    mine = fresh.config.refs["NEXT_HOP|te"]
    group = next(iter(fresh.sai.objects(T.NEXT_HOP_GROUP)))
    members = {m.next_hop_id for m in fresh.sai.members(group).values()}  # type: ignore[arg-type]
    assert mine not in members
    assert set(fresh.routes.next_hops.values()) & members == members
