"""Faults you can inject into a running lab and undo: a library, usable with or without pytest.

Each fault is one module of `catalog/`, which does one thing to the lab and notes how to undo
it as data; `Faults` keeps the undo stack so everything injected is reverted (in reverse
order) even when a test fails, or from another shell.
"""

from harness.faults.injector import Fault, Faults

__all__ = ["Fault", "Faults"]
