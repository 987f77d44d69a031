"""The switch agent: zebra -> FPM -> agent -> SAI -> kernel, one agent per switch node.

Like SONiC's fpmsyncd + orchagent in one process: it listens for zebra's `dplane_fpm_nl`
connection inside the node's namespace, decodes the netlink route and nexthop messages, turns
them into SAI calls, and serves its state (objects, counters, call log, faults) on a unix socket.
"""
