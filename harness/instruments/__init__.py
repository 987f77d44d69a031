"""Instruments for people at a running lab: what they would otherwise piece together from
tcpdump in each node, logs and `inspect` (issue 42). `capture`: one pcapng across ports."""
