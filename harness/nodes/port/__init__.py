"""A port's egress at line rate (fl_port.c): queues in a shared buffer, ECN marking, PFC."""
