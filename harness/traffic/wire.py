"""The test packet: sequence number and send time (CLOCK_MONOTONIC, shared by all namespaces)."""

from __future__ import annotations

import struct

HEADER = struct.Struct("!QQ")  # seq, send time in ns
MIN_SIZE = HEADER.size
