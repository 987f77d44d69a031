"""fabric-lab: emulate AI data-center fabrics with namespaces, FRR and a SAI-on-Linux dataplane.

Architecture, in the order a lab is built:
topology (file -> plan) -> runtime (namespaces) -> nodes (FRR, agent, SAI) -> links -> faults.
"""

from harness.linux import pyroute2_bare

pyroute2_bare.register()
