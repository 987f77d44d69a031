"""Sequenced, timestamped test flows between hosts: loss, reordering, latency, planes, outage."""
