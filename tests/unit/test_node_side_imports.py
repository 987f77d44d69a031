"""What runs inside nodes (the SAI agent, the spray agent, the traffic programs) imports only
what the node images carry: the standard library, pyroute2 and harness itself. A container has
no pydantic, jinja2, rich or ruamel; an import of one kills the program on docker only."""

from __future__ import annotations

import subprocess
import sys

NODE_MODULES = ("harness.nodes.switch.agent.main", "harness.spray.agent", "harness.traffic.sender",
                "harness.traffic.receiver")
HOST_ONLY = ("pydantic", "jinja2", "rich", "ruamel")

BLOCKER = f"""
import sys
class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {HOST_ONLY!r}:
            raise ModuleNotFoundError(f"{{name}} is not in the node images")
sys.meta_path.insert(0, Blocker())
import importlib
for module in {NODE_MODULES!r}:
    importlib.import_module(module)
"""


def test_node_programs_import_nothing_the_images_lack() -> None:
    out = subprocess.run([sys.executable, "-c", BLOCKER], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr


def test_pyroute2_loads_only_the_modules_the_harness_names() -> None:
    """Its package __init__ would import all of pyroute2 (NDB, IPDB, WireGuard...): 0.4 s of
    every command's start and memory in every node agent (harness/linux/pyroute2_bare.py)."""
    probe = ("import sys, importlib\n"
             f"for module in {NODE_MODULES!r} + ('harness.deploy.lab', 'harness.cli'):\n"
             "    importlib.import_module(module)\n"
             "loaded = sorted(m for m in sys.modules if m.startswith(('pyroute2.ndb', "
             "'pyroute2.ipdb', 'pyroute2.conntrack', 'pyroute2.netlink.generic.wireguard')))\n"
             "assert not loaded, loaded\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr


def test_the_node_agents_start_without_pyroute2s_iproute() -> None:
    """IPRoute's import is 0.15 s of CPU and 10 MB in each agent: on fpf-64 every one of its
    112 nodes starts one, while the nodes started before it are converging."""
    probe = ("import sys, harness.nodes.switch.agent.main, harness.spray.agent\n"
             "assert 'pyroute2.iproute' not in sys.modules\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
