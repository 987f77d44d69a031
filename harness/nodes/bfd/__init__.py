"""BFD offload: fl-bfd runs a node's BFD sessions for its bfdd, as a switch ASIC does."""
