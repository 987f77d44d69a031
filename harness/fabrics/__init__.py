"""Fabric generators: parameters in, a topology file (the ordinary schema) out; one module
each, registered here (fabrics/base.py says what a generator provides)."""

from __future__ import annotations

from harness.fabrics import bag, fpf, rbb, scaleup
from harness.fabrics.base import Fabric

GENERATORS: dict[str, Fabric] = {f.name: f for f in (fpf.FABRIC, bag.FABRIC, rbb.FABRIC,
                                                    scaleup.FABRIC)}
