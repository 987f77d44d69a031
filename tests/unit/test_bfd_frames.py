"""bfdd control-socket frames: split across reads, several per read, state per NIC."""

from __future__ import annotations

import json

from harness.spray.bfd import HEADER, BfdState, parse_frames, state_of


def frame(body: dict) -> bytes:
    data = json.dumps(body).encode()
    return HEADER.pack(len(data), 0, 4, 1) + data


DOWN = {"op": "status", "ipv6": False, "peer-address": "10.1.0.39",
        "local-interface": "eth4", "state": "down"}


def test_a_frame_split_over_two_reads_is_parsed_once_complete():
    data = frame(DOWN)
    buffer = bytearray(data[:10])
    assert parse_frames(buffer) == []
    buffer += data[10:]
    assert parse_frames(buffer) == [DOWN] and buffer == bytearray()


def test_several_frames_in_one_read():
    buffer = bytearray(frame({"status": "ok"}) + frame(DOWN) + frame(DOWN)[:5])
    assert parse_frames(buffer) == [{"status": "ok"}, DOWN]
    assert len(buffer) == 5


def test_status_messages_become_states_and_others_are_ignored():
    assert state_of(DOWN) == BfdState(nic="eth4", ipv6=False, peer="10.1.0.39", up=False)
    assert state_of({**DOWN, "state": "up", "ipv6": True}).up is True
    assert state_of({**DOWN, "state": "init"}).up is False
    assert state_of({"op": "add", "local-interface": "eth1"}) is None
    assert state_of({"status": "ok"}) is None
