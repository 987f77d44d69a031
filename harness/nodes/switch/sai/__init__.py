"""A SAI-shaped switch API whose "ASIC" is the Linux kernel of one node namespace.

Like SONiC's SAI-VS or FBOSS's fake SAI, it gives a switch agent something to program: typed
objects with SAI attribute names, SAI status codes, reference counts and table capacities.
It knows nothing of FRR or topologies; backends (kernel over netlink, fake in memory) do the
programming.
"""
