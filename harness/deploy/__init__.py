"""Deploy: a lab context (plan, runtime, journal) and the named stages that build a lab in it."""
