"""Fault targets, the undo stack and fault reports (no lab needed)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest

from harness.core.errors import LabError
from harness.fabrics.fpf import FpfParams, plan
from harness.faults import Faults, injector, records
from harness.faults.targets import node_addresses, resolve_link
from harness.testing.report import fault_records, junit_properties, write_report
from harness.traffic.analysis import analyse

PLAN = plan(FpfParams(planes=2, leaves_per_plane=2, spines_per_plane=1, hosts=4))


def test_links_are_named_by_one_end_or_by_both_nodes():
    link, ends = resolve_link(PLAN, "p0-leaf1:eth1")
    assert [str(e) for e in ends] == ["p0-leaf1:eth1"] and link.b.node == "p0-spine1"
    same, both = resolve_link(PLAN, "p0-spine1--p0-leaf1")
    assert same == link and len(both) == 2
    assert resolve_link(PLAN, "p0-leaf1:eth1--p0-spine1:eth1")[0] == link


def test_an_unknown_link_error_shows_both_spellings():
    with pytest.raises(LabError, match=r"'node:iface'.*'nodeA--nodeB'"):
        resolve_link(PLAN, "p0-leaf1:eth9")


def test_node_addresses_cover_loopback_and_links():
    v4, v6 = node_addresses(PLAN, "host1")
    assert v4[0] == PLAN.node("host1").loopback4 and len(v4) == 3 and len(v6) == 3


class _Recorder:
    """Stands in for the lab: each fault's undo names it, and restoring records the name."""

    def __init__(self, monkeypatch, lab_dir):
        self.undone = []
        self.lab = SimpleNamespace(dir=lab_dir, plan=PLAN)
        monkeypatch.setattr(injector, "restore", self.restore)

    def restore(self, lab, record, catalog):
        self.undone.append(record.undo.restart)
        if record.undo.restart.endswith("!"):
            raise RuntimeError(f"{record.undo.restart} stuck")

    @staticmethod
    def fault(name):
        def do(fault_id, undo):
            undo.restart = name
        return do


def test_undo_all_reverts_newest_first_and_survives_a_failing_undo(monkeypatch, tmp_path):
    rec = _Recorder(monkeypatch, tmp_path)
    faults = Faults(rec.lab)
    first = faults._inject("link_down", "a", rec.fault("a"))
    faults._inject("plane_down", "1", rec.fault("b!"))
    faults._inject("partition", "x|y", rec.fault("c"))
    faults.undo(first)
    with pytest.raises(LabError, match="b! stuck"):
        faults.undo_all()
    assert rec.undone == ["a", "c", "b!"] and faults.active == []
    assert [str(r) for r in records.load_all(tmp_path)] == ["plane_down(1)"], \
        "a fault whose undo failed stays on record, to be cleared again"


def test_another_shell_sees_and_undoes_what_one_injected(monkeypatch, tmp_path):
    rec = _Recorder(monkeypatch, tmp_path)
    Faults(rec.lab)._inject("link_down", "a", rec.fault("a"))
    Faults(rec.lab)._inject("node_crash", "b", rec.fault("b"))
    second = Faults.in_place(rec.lab)
    assert [(f.id, str(f)) for f in second.active] == [(1, "link_down(a)"),
                                                        (2, "node_crash(b)")]
    second.node_restart("b")
    assert rec.undone == ["b"] and [r.id for r in records.load_all(tmp_path)] == [1]
    assert Faults(rec.lab)._inject("plane_down", "3", rec.fault("c")).id == 2, \
        "an id is free again once its fault is undone, never while it is in place"


def test_a_fault_failing_half_way_is_undone_as_far_as_it_got(monkeypatch, tmp_path):
    rec = _Recorder(monkeypatch, tmp_path)

    def half(fault_id, undo):
        undo.restart = "half"
        raise LabError("the second switch refused")

    with pytest.raises(LabError, match="second switch"):
        Faults(rec.lab)._inject("plane_down", "1", half)
    assert rec.undone == ["half"] and records.load_all(tmp_path) == []
    assert list(records.state_dir(tmp_path).iterdir()) == []


def test_ids_claimed_at_once_never_collide(tmp_path):
    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(lambda _: records.claim_id(tmp_path), range(64)))
    assert sorted(ids) == list(range(1, 65))


def test_a_named_undo_needs_a_matching_active_fault(tmp_path):
    faults = Faults(SimpleNamespace(dir=tmp_path))
    with pytest.raises(LabError, match="no active plane_down"):
        faults._undo_matching("plane_down", "3")


def test_records_pair_each_fault_with_the_flows_that_saw_it(monkeypatch, tmp_path):
    rec = _Recorder(monkeypatch, tmp_path / "lab")
    faults = Faults(rec.lab)
    send = [10**9 + i * 10**6 for i in range(100)]
    arrivals = {"seq": list(range(90)), "sent_ns": send[:90],
                "recv_ns": [t + 1000 for t in send[:90]], "nic": ["eth1"] * 90}
    result = analyse("host1", "host3", send, arrivals, {"eth1": 0}, 1000)
    fault = faults._inject("plane_down", "3", rec.fault("p"))
    fault.injected_ns, fault.undone_ns = send[50], send[-1] + 10**9
    records = fault_records("t::x", faults.history, [result], "passed")
    assert [(r["fault"], r["lost"], r["outage_ms"]) for r in records] == [
        ("plane_down(3)", 10, 10.0)]
    assert ("plane_down(3) host1->host3.outage_ms", 10.0) in junit_properties(records)
    write_report(tmp_path / "r" / "faults.json", records)
    assert json.loads((tmp_path / "r" / "faults.json").read_text())["results"] == records
