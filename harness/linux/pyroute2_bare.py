"""pyroute2 without its package `__init__`.

pyroute2 0.9's `__init__` imports every module the library has (NDB, IPDB, conntrack,
WireGuard, nl80211, plan9...): 0.4 s of every labctl command's start-up, and memory in every
node agent, for the few modules the harness uses. Registered bare, the package loads only the
submodules that are named (`pyroute2.iproute`, `pyroute2.netlink.rtnl...`), and pyroute2's
own modules import each other by submodule, so nothing else changes. `harness/__init__.py`
does this before anything imports pyroute2; the harness never imports names from the
package itself (`from pyroute2 import IPRoute`), only from its submodules.
"""

from __future__ import annotations

import importlib.util
import sys
import types


def register() -> None:
    if "pyroute2" in sys.modules:
        return  # imported whole before the harness was: nothing left to save
    spec = importlib.util.find_spec("pyroute2")
    if spec is None or spec.submodule_search_locations is None:
        return  # not installed: the first import that needs it says so
    package = types.ModuleType("pyroute2")
    package.__path__ = list(spec.submodule_search_locations)
    package.__spec__ = spec
    package.__file__ = spec.origin
    package.__package__ = "pyroute2"
    sys.modules["pyroute2"] = package
