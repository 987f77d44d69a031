"""One lossless RDMA class from many vendors' QoS schemes.

A vendor profile (qos_profiles/*.yml, or a file beside the topology) says how that vendor's
switches classify: DSCP -> traffic class, TC -> queue, which TCs are lossless (PFC on) and
which one carries congestion notification packets (CNP), and where ECN marking starts. A
fabric whose NICs were set up for different vendors must still put every RoCEv2 packet in one
lossless queue, so the lab normalizes: a DSCP any profile sends into one of its lossless TCs
goes to the lab's lossless TC, a DSCP of a profile's CNP class to the lab's CNP TC, anything
else to TC 0 (best effort); each TC to its queue. The switches get the result as SAI QoS maps
(render_sai.py) and the kernel makes them queues (sai/queues.py).

A DSCP that one profile calls lossless and another CNP or best effort cannot be honoured for
both: it is refused at its line in each file. The class's ECN marking is the earliest of its
profiles' (lowest thresholds, highest probability). A lab whose `qos:` declares a `buffer`
has the switches enforce it: a SAI WRED object on the lossless queue, applied by the port
engine (harness/nodes/port) with the buffers and PFC; without a buffer it stays declared.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from harness.core.errors import TopologyError, TopologyProblem
from harness.topology.loader import LoadedTopology, SourceMap, parse_yaml, schema_problems
from harness.topology.plan import LinkPlan, QosPlan
from harness.topology.schema import Ecn, Kind, NodeFields

SHIPPED = Path(__file__).parent / "qos_profiles"
Dscp = Annotated[int, Field(ge=0, le=63)]
TrafficClass = Annotated[int, Field(ge=0, le=7)]


class VendorProfile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    vendor: str
    dscp_to_tc: dict[Dscp, TrafficClass]
    tc_to_queue: dict[TrafficClass, TrafficClass]
    lossless_tc: list[TrafficClass] = Field(min_length=1)
    cnp_tc: TrafficClass | None = None
    ecn: Ecn

    @model_validator(mode="after")
    def _classes_reachable(self) -> VendorProfile:
        named = [*self.lossless_tc, *([] if self.cnp_tc is None else [self.cnp_tc])]
        for tc in named:
            if tc not in self.dscp_to_tc.values():
                raise ValueError(f"traffic class {tc} is lossless or CNP but no DSCP maps to it")
            if tc not in self.tc_to_queue:
                raise ValueError(f"traffic class {tc} has no queue in tc_to_queue")
        return self

    def class_of(self, dscp: int) -> str:
        tc = self.dscp_to_tc[dscp]
        return "lossless" if tc in self.lossless_tc else "cnp" if tc == self.cnp_tc else \
            "best effort"


@dataclass(frozen=True)
class LoadedProfile:
    profile: VendorProfile
    source: SourceMap


def profile_path(name: str, topology_dir: Path) -> Path:
    """A shipped profile by name, or the user's file (relative to the topology)."""
    if name.endswith((".yml", ".yaml")):
        return topology_dir / name
    return SHIPPED / f"{name}.yml"


def shipped() -> list[str]:
    return sorted(p.stem for p in SHIPPED.glob("*.yml"))


def load_profile(path: Path) -> LoadedProfile:
    data, src = parse_yaml(path.read_text(), str(path))
    try:
        return LoadedProfile(VendorProfile.model_validate(data), src)
    except ValidationError as exc:
        raise TopologyError(schema_problems(exc, src, VendorProfile),
                            what=f"QoS profile {path}") from None


def plan_qos(loaded: LoadedTopology, nodes: dict[str, NodeFields]) -> QosPlan | None:
    qos = loaded.spec.qos
    if qos is None:
        return None
    src = loaded.source
    profiles: list[LoadedProfile] = []
    problems: list[TopologyProblem] = []
    if not any(n.kind is Kind.sai for n in nodes.values()):
        problems.append(src.problem(("qos",), "QoS maps are programmed by SAI switches and "
                                    "this lab has none", "give the switches `kind: sai`, or "
                                    "remove the `qos:` section"))
    for i, name in enumerate(qos.profiles):
        path = profile_path(name, Path(src.file).parent)
        if not path.is_file():
            problems.append(src.problem(("qos", "profiles", i), f"no QoS profile {name!r}",
                                        f"use one of: {', '.join(shipped())}, or a .yml file "
                                        "beside the topology"))
            continue
        try:
            profiles.append(load_profile(path))
        except TopologyError as exc:
            problems += exc.problems
    if problems:
        raise TopologyError(problems)
    classes = normalized_classes(profiles)
    tc = {"lossless": qos.lossless.tc, "cnp": qos.cnp.tc}
    return QosPlan(
        profiles=[p.profile.vendor for p in profiles],
        dscp_to_tc={dscp: tc[cls] for dscp, cls in sorted(classes.items()) if cls in tc},
        tc_to_queue={0: 0, qos.lossless.tc: qos.lossless.queue, qos.cnp.tc: qos.cnp.queue},
        lossless_tc=qos.lossless.tc, cnp_tc=qos.cnp.tc,
        ecn=qos.ecn.model_dump() if isinstance(qos.ecn, Ecn) else
        {"min_bytes": min(p.profile.ecn.min_bytes for p in profiles),
         "max_bytes": min(p.profile.ecn.max_bytes for p in profiles),
         "probability": max(p.profile.ecn.probability for p in profiles)},
        buffer=qos.buffer, xoff=qos.xoff, pfc=qos.pfc, mark=qos.ecn is not False,
        watchdog_ms=(qos.watchdog.detect_ms, qos.watchdog.restore_ms) if qos.watchdog else None)


def normalized_classes(profiles: list[LoadedProfile]) -> dict[int, str]:
    """Each DSCP a profile names -> its class (lossless, cnp, best effort), the same in
    every profile that names it; a DSCP the profiles disagree on is refused in each file."""
    seen: dict[int, dict[str, LoadedProfile]] = {}
    for loaded in profiles:
        for dscp in loaded.profile.dscp_to_tc:
            seen.setdefault(dscp, {}).setdefault(loaded.profile.class_of(dscp), loaded)
    problems = []
    for dscp, by_class in sorted(seen.items()):
        if len(by_class) > 1:
            said = "; ".join(f"{cls} in {p.profile.vendor} ({p.source.file})"
                             for cls, p in by_class.items())
            problems += [p.source.problem(("dscp_to_tc", str(dscp)),
                                          f"DSCP {dscp} is {said}: one fabric cannot honour both",
                                          "leave one of these profiles out of `qos.profiles`, "
                                          "or mark that traffic with another DSCP")
                         for p in by_class.values()]
    if problems:
        raise TopologyError(problems, what="the lab's QoS profiles")
    return {dscp: next(iter(by_class)) for dscp, by_class in seen.items()}


def bypassed_ports(links: list[LinkPlan], nodes: dict[str, NodeFields]) -> list[str]:
    """SAI ports whose impaired link takes frames past (userspace engine) or in place of
    (netem) their queues: what deploy warns of under `qos:`."""
    return [f"{end.node}:{end.iface}" for link in links if not link.impairment.is_clean
            for end in (link.a, link.b) if nodes[end.node].kind is Kind.sai]
