"""Node kinds: what runs inside a node's namespace and every difference between kinds
(`base.py` says the hooks, `kind.py` maps the plan's kinds to them): FRR routers, hosts that
spray over planes, containerlab's linux and bridge nodes, and the switch wing (`switch/`)."""
