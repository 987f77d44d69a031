"""The live view's state from a lab's event record (no lab: its record and plan only), and the
page that shows it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from harness.core.events import Event, record, say_at
from harness.faults import records
from harness.instruments.live import LiveState
from harness.instruments.live_page import page
from harness.testing import plan_from

PLAN = plan_from("topologies/fpf-mini.yml")


def test_links_take_the_state_their_ports_and_sessions_last_reported(tmp_path: Path) -> None:
    state = LiveState(SimpleNamespace(plan=PLAN, dir=tmp_path, node_names=[]))
    cut = next(k for k in PLAN.links if {k.a.node, k.b.node} == {"host1", "p1-leaf1"})
    quiet = next(k for k in PLAN.links if {k.a.node, k.b.node} == {"host2", "p2-leaf1"})
    end = quiet.a if quiet.a.node == "host2" else quiet.b
    session = next(s for s in PLAN.sessions if s.node == "host2" and s.iface == end.iface)
    record(tmp_path, [Event(1.0, "link", "down", cut.a.node, {"port": cut.a.iface}),
                      Event(2.0, "bgp", "down", "host2", {"peer": session.peer_ip})],
           "recorder")
    records.claim_id(tmp_path)
    records.save(tmp_path, records.Record(id=1, kind="link_down", target=cut.name,
                                          injected_at=1.0))
    shown = state.snapshot()
    assert shown["links"][cut.name]["state"] == "down"
    assert shown["links"][quiet.name]["state"] == "sessions down"
    others = {k.name for k in PLAN.links} - {cut.name, quiet.name}
    assert {shown["links"][name]["state"] for name in others} == {"up"}
    assert shown["faults"] == [f"link_down({cut.name})"]
    assert len(shown["events"]) == 2 and shown["events"][1].split()[1:4] == ["host2", "bgp", "down"]
    say_at(tmp_path, 3.0, "fault", "undone", id=1)
    record(tmp_path, [Event(3.1, "link", "up", cut.a.node, {"port": cut.a.iface})], "recorder")
    assert state.snapshot()["links"][cut.name]["state"] == "up"  # read on from where it was


def test_the_page_draws_every_link_and_polls_the_state() -> None:
    html = page(PLAN, ("A plane gone dark", "Find it."))
    assert all(f'data-link="{k.name}"' in html for k in PLAN.links)
    assert 'fetch("/state")' in html and "A plane gone dark" in html
