"""Fault targets, the undo stack and fault reports (no lab needed)."""

from __future__ import annotations

import json

import pytest

from harness.errors import LabError
from harness.fabrics.fpf import FpfParams, plan
from harness.faults import Faults
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
    def __init__(self):
        self.undone = []

    def fault(self, name, fail=False):
        def undo():
            self.undone.append(name)
            if fail:
                raise RuntimeError(f"{name} stuck")
        return lambda fault_id: undo


def test_undo_all_reverts_newest_first_and_survives_a_failing_undo():
    faults, rec = Faults(lab=None), _Recorder()
    first = faults._inject("link_down", "a", rec.fault("a"))
    faults._inject("plane_down", "1", rec.fault("b", fail=True))
    faults._inject("partition", "x|y", rec.fault("c"))
    faults.undo(first)
    with pytest.raises(LabError, match="b stuck"):
        faults.undo_all()
    assert rec.undone == ["a", "c", "b"] and faults.active == []


def test_a_named_undo_needs_a_matching_active_fault():
    faults = Faults(lab=None)
    with pytest.raises(LabError, match="no active plane_down"):
        faults._undo_matching("plane_down", "3")


def test_records_pair_each_fault_with_the_flows_that_saw_it(tmp_path):
    faults = Faults(lab=None)
    send = [10**9 + i * 10**6 for i in range(100)]
    arrivals = {"seq": list(range(90)), "sent_ns": send[:90],
                "recv_ns": [t + 1000 for t in send[:90]], "nic": ["eth1"] * 90}
    result = analyse("host1", "host3", send, arrivals, {"eth1": 0}, 1000)
    fault = faults._inject("plane_down", "3", lambda fid: lambda: None)
    fault.injected_ns, fault.undone_ns = send[50], send[-1] + 10**9
    records = fault_records("t::x", faults.history, [result], "passed")
    assert [(r["fault"], r["lost"], r["outage_ms"]) for r in records] == [
        ("plane_down(3)", 10, 10.0)]
    assert ("plane_down(3) host1->host3.outage_ms", 10.0) in junit_properties(records)
    write_report(tmp_path / "r" / "faults.json", records)
    assert json.loads((tmp_path / "r" / "faults.json").read_text())["results"] == records
