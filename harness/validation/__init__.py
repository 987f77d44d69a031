"""Performance validation of a running lab: profiles, the run across tiers of hosts, checks."""
