"""The lab's event record (harness/core/events.py) and the recorder's reading of bgpd's log
and of route bursts (harness/instruments/recorder.py), without a lab."""

from __future__ import annotations

from pathlib import Path

from harness.core.events import Alarms, Event, Follower, read, record, say_at
from harness.instruments.recorder import (
    ROUTE_QUIET_S,
    RTM_DELROUTE,
    RTM_NEWROUTE,
    RTMSG,
    NodeWatch,
    adjchange,
    log_time,
)

# Lines as FRR 8.4's bgpd wrote them in a lab (log timestamp precision 6, TZ=UTC)
UP = "2026/12/07 21:43:24.969661 BGP: [N9HHH-F8H1M] %ADJCHANGE: neighbor 10.1.0.39(vm) in " \
     "vrf default Up"
DOWN = "2026/12/07 21:43:21.957107 BGP: [N9HHH-F8H1M] %ADJCHANGE: neighbor 10.1.0.39(vm) in " \
       "vrf default Down BGP Notification send"
OTHER = "2026/12/07 21:42:30.023379 BGP: [M59KS-A3ZXZ] bgp_update_receive: rcvd End-of-RIB " \
        "for IPv4 Unicast from 10.1.0.39 in vrf default"


def test_sources_are_read_back_merged_in_time_order(tmp_path: Path) -> None:
    record(tmp_path, [Event(3.0, "bfd", "down", "host1", {"port": "eth4"}),
                      Event(5.0, "bgp", "down", "host1")], "recorder")
    say_at(tmp_path, 4.0, "fault", "applied", id=1, fault="plane_down(3)", skipped=None)
    say_at(tmp_path, 1.0, "deploy", "converged", nodes=28)
    found = read(tmp_path)
    assert [(e.t, e.kind, e.node) for e in found] == [
        (1.0, "deploy", None), (3.0, "bfd", "host1"), (4.0, "fault", None), (5.0, "bgp", "host1")]
    assert found[2].detail == {"id": 1, "fault": "plane_down(3)"}  # no value, no key


def test_a_line_being_written_waits_and_a_follower_sees_only_what_is_new(tmp_path: Path) -> None:
    say_at(tmp_path, 1.0, "deploy", "converged")
    follower = Follower(tmp_path, from_start=False)
    assert follower.poll() == []
    say_at(tmp_path, 2.0, "fault", "applied")
    with (tmp_path / "events" / "lab.jsonl").open("a") as f:
        f.write('{"t":3.0,"kind":"fau')  # half a line: a writer caught in mid-write
    assert [e.t for e in follower.poll()] == [2.0]
    assert [e.t for e in read(tmp_path)] == [1.0, 2.0]
    with (tmp_path / "events" / "lab.jsonl").open("a") as f:
        f.write('lt","what":"undone"}\n')
    assert [(e.t, e.what) for e in follower.poll()] == [(3.0, "undone")]


def test_a_lab_being_destroyed_records_nothing(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    say_at(gone, 1.0, "fault", "undone")
    assert not gone.exists()


def test_an_alarm_is_raised_once_however_its_reading_moves_and_cleared_once(
        tmp_path: Path) -> None:
    alarms = Alarms(tmp_path, "leaf1", "platform")
    alarms.update({})
    alarms.update({"sensor asic high": "asic 91 C above high 90 C"})
    alarms.update({"sensor asic high": "asic 93 C above high 90 C", "fan fan2": "fan2 failed"})
    alarms.update({"fan fan2": "fan2 failed"})
    alarms.update({})
    said = [(e.what, e.detail["alarm"], e.detail.get("text")) for e in read(tmp_path)]
    assert said == [("raised", "sensor asic high", "asic 91 C above high 90 C"),
                    ("raised", "fan fan2", "fan2 failed"), ("cleared", "sensor asic high", None),
                    ("cleared", "fan fan2", None)]
    assert {(e.kind, e.node, e.detail["by"]) for e in read(tmp_path)} == {
        ("alarm", "leaf1", "platform")}
    Alarms(None, "leaf1", "agent").update({"fpm": "zebra is not connected over FPM"})
    assert len(read(tmp_path)) == 4  # a daemon started without a lab records nothing


def test_bgpds_session_changes_are_read_off_its_log_in_utc() -> None:
    peers = {"10.1.0.39": "p3-leaf1"}
    up, down = adjchange("host1", UP, peers), adjchange("host1", DOWN, peers)
    assert up == Event(1796679804.969661, "bgp", "up", "host1",
                       {"peer": "10.1.0.39", "peer_node": "p3-leaf1", "reason": None})
    assert down is not None and down.what == "down"
    assert down.detail["reason"] == "BGP Notification send"
    assert adjchange("host1", OTHER, peers) is None
    assert log_time("1970/01/01 00:00:01") == 1.0  # a user's config: to the second


def test_a_burst_of_route_changes_is_said_once_the_node_is_quiet() -> None:
    node = NodeWatch("host1", "/nonexistent", set(), None, {}, {})
    zebra = RTMSG.pack(2, 32, 0, 0, 254, 186, 0, 1, 0)  # main table, proto bgp
    kernel = RTMSG.pack(2, 32, 0, 0, 252, 2, 0, 1, 0)  # a spray table's (table 1003: compat)
    local = RTMSG.pack(2, 32, 0, 0, 255, 186, 0, 2, 0)
    for kind, body, at in ((RTM_DELROUTE, zebra, 10.0), (RTM_NEWROUTE, kernel, 10.01),
                           (RTM_NEWROUTE, local, 10.02), (RTM_NEWROUTE, zebra, 10.05),
                           (RTM_NEWROUTE, zebra, 10.1)):
        node.route(kind, body, at)
    assert node.quiet_burst(10.1 + ROUTE_QUIET_S / 2) is None  # still busy
    said = node.quiet_burst(10.1 + ROUTE_QUIET_S + 0.001)
    assert said == Event(10.0, "routes", "changed", "host1",
                         {"installed": 2, "removed": 1, "took_ms": 100.0})
    assert node.quiet_burst(20.0) is None
