"""How fast a spraying host steered around a failure, bounded by the mechanism: its probes'
detect time after the fault was in place (plus how late the engines woke), and the flow's
outage by the moment the host's agent switched nftables. FPF planes and scale-up switches
are steered around alike."""

from __future__ import annotations

from harness.faults import Faults
from harness.runtime.context import LabContext
from harness.spray.nic import probe_timing, read_spray
from harness.testing.load import WakeupLateness
from harness.traffic.analysis import FlowResult


def switch_after_fault(lab: LabContext, faults: Faults, src: str, dst: str
                       ) -> tuple[float, float]:
    """When src's agent saw the event that moved dst's spray set, and when it switched nft,
    in ms after the last fault was injected."""
    fault_ns = faults.history[-1].injected_ns
    view = read_spray(lab, src)
    assert view is not None, f"{src}: no sprayer state"
    event_ns, switched_ns = view.switched_ns[lab.plan.node(dst).loopback4]
    return (event_ns - fault_ns) / 1e6, (switched_ns - fault_ns) / 1e6


def assert_probes_steered(lab: LabContext, faults: Faults, result: FlowResult,
                          load: WakeupLateness, rate_pps: float) -> None:
    """The flow's source took the failure out of its destination's spray set within the
    probes' detect time after the fault was in place on every switch it touched (plus how
    late the two engines and the agent woke: the agent's event time is when it woke to the
    verdict), and the flow healed when nft switched (plus one packet interval and the
    packets in flight)."""
    detected_ms, switched_ms = switch_after_fault(lab, faults, result.src, result.dst)
    fault = faults.history[-1]
    applying_ms = (fault.applied_ns - fault.injected_ns) / 1e6
    where = f"{result}; event {detected_ms:.1f} ms, switch {switched_ms:.1f} ms, fault " \
            f"applied in {applying_ms:.1f} ms, wake-up lateness {load.max_ms:.1f} ms over " \
            f"{load.samples} samples"
    timing = probe_timing(lab.plan)
    assert timing is not None, "the lab sprays without probes"
    bound_ms = applying_ms + timing.detect_ms + 3 * load.max_ms
    assert 0 < detected_ms <= bound_ms, where
    assert result.outage_ms <= switched_ms + 1000 / rate_pps + result.latency_us["max"] / 1000, \
        where
