"""Fuzz the loader: whatever the input, the result is a plan or a TopologyError, never a crash."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.errors import TopologyError
from harness.topology.augment import augment
from harness.topology.loader import dump_yaml, load_text
from harness.topology.plan import LabPlan

names = st.sampled_from(["a", "b", "leaf1", "spine1", "x.y", "", "host-9"])
ifaces = st.sampled_from(["eth1", "eth2", "lo", "e" * 20, ""])
scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**10), st.floats(),
                    st.text(max_size=12), st.sampled_from(["5ms", "1%", "10Gbit", "leaf"]))
node_specs = st.dictionaries(
    st.sampled_from(["role", "asn", "plane", "kind", "rol", "loopback4", "labels", "exec"]),
    st.one_of(scalars, st.sampled_from(["leaf", "spine", "host"])), max_size=4)
links = st.fixed_dictionaries(
    {"endpoints": st.lists(st.builds(lambda n, i: f"{n}:{i}", names, ifaces), max_size=3)},
    optional={"delay": scalars, "loss": scalars, "rate": scalars, "distance_km": scalars,
              "mtu": scalars, "bogus": scalars})
topologies = st.fixed_dictionaries(
    {"name": st.one_of(names, scalars),
     "topology": st.fixed_dictionaries(
         {"nodes": st.dictionaries(names, node_specs, max_size=4)},
         optional={"links": st.lists(links, max_size=4), "defaults": node_specs})},
    optional={"addressing": st.dictionaries(st.sampled_from(["loopback4", "p2p4", "p2p6"]),
                                            st.sampled_from(["10.0.0.0/30", "10.0.0.0/8",
                                                             "fd00::/127", "nope"]))})


def _outcome(text: str) -> LabPlan | TopologyError:
    try:
        return augment(load_text(text, "fuzz.yml"))
    except TopologyError as exc:
        assert exc.problems
        for p in exc.problems:
            assert p.file == "fuzz.yml" and p.message
            assert p.line is None or p.line >= 1
        return exc


@settings(max_examples=300, deadline=None)
@given(topologies)
def test_structured_topologies_never_crash(data: dict) -> None:
    _outcome(dump_yaml(data))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("name:topology{}[]- \n\t'\"&*!#%@ab1")),
               max_size=80))
def test_arbitrary_text_never_crashes(text: str) -> None:
    _outcome(text)
