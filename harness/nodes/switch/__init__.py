"""The emulated switch, `kind: sai`: FRR -> FPM -> agent -> SAI -> kernel, as SONiC and FBOSS
run it. README.md beside this file follows a route and a configuration document through it.

Imports nothing itself: the agent and the platform daemon run inside nodes, where only what
the node images carry may load (tests/unit/test_node_side_imports.py)."""
