"""Runtimes create the nodes of a lab; every runtime gives each node a network namespace."""
