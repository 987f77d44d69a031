"""Faults you can inject into a running lab and undo: a library, usable with or without pytest.

Each fault function does one thing to the lab and returns how to undo it; `Faults` keeps the
undo stack so everything injected is reverted (in reverse order) even when a test fails.
"""

from harness.faults.injector import Fault, Faults

__all__ = ["Fault", "Faults"]
