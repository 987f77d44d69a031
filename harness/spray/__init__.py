"""Per-packet spraying on a multi-plane host: the emulated NIC of an FPF GPU endpoint.

`agent` runs inside a host's namespace and keeps, per destination, the set of planes whose
next hops zebra has installed; `ruleset` turns that set into nftables + policy routing;
`control` starts agents at deploy and reads their state for `inspect` and tests.
"""
