"""Links between nodes: veth pairs, fibre propagation, and (optional) impairments."""
