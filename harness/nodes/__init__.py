"""Node kinds: what runs inside a node's namespace (FRR today; the SAI agent builds on it)."""
