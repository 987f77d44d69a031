"""The userspace impairment engine (fl_impair.c): building it, its parameters, its control socket.

The engine is C because the per-packet work (read, decide, hold, send) must reach well over
50k packets/s per direction on a 2-core box while FRR and traffic share the cores; Python owns
everything else. `make` builds it (harness/core/build.py); container images carry it prebuilt.
"""

from __future__ import annotations

import socket
from pathlib import Path

from harness.core.build import built
from harness.core.errors import LabError
from harness.topology.plan import Impairment

ENGINE = "fl-impair"
CONTROL_TIMEOUT = 2.0


def binary() -> Path:
    return built(ENGINE)


EVERY_FRAME = 64  # pfc_dscp: no DSCP, the class takes every frame
# The engine as it was before batches (issue 40): a wake-up and a system call per frame, at a
# real-time priority. The benches measure it beside the default (BATCHED) in the same run.
FRAME_AT_A_TIME = "batch=0 rt_priority=10"
BATCHED = "batch=1 rt_priority=0"


def engine_args(impairment: Impairment) -> list[str]:
    """The engine's key=value form of an impairment (its units: ns, percent, bit/s)."""
    pfc = impairment.lossless
    return [f"delay_ns={round(impairment.delay_us * 1000)}",
            f"jitter_ns={round(impairment.jitter_us * 1000)}",
            f"loss_pct={impairment.loss_pct!r}",
            f"duplicate_pct={impairment.duplicate_pct!r}",
            f"rate_bps={impairment.rate_bps or 0}",
            f"pfc_xoff={pfc.xoff if pfc else 0}",
            *([f"pfc_headroom={pfc.headroom}", f"pfc_drain_bps={pfc.drain_bps}",
               f"pfc_dscp={EVERY_FRAME if pfc.dscp is None else pfc.dscp}"] if pfc else [])]


def request(control: str, message: str) -> str:
    """One request on the engine's control socket; its reply."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
        sock.settimeout(CONTROL_TIMEOUT)
        try:
            sock.connect(control)
            sock.send(message.encode())
            return sock.recv(512).decode()
        except OSError as exc:
            raise LabError(f"impairment engine at {control} does not answer: {exc}") from None


def set_live(control: str, impairment: Impairment) -> None:
    configure(control, " ".join(engine_args(impairment)))


def configure(control: str, settings: str) -> None:
    """`settings` (key=value ...) in force at once, all or none."""
    reply = request(control, f"set {settings}")
    if reply != "ok":
        raise LabError(f"impairment engine refused the change: {reply}")


def stats(control: str) -> dict[str, int]:
    reply = request(control, "stats")
    return {k: int(v) for k, v in (item.split("=") for item in reply.split())}
