"""nftables through libnftables in-process: a ruleset swap in ~1 ms instead of ~20 ms for
forking `nft -f` (more through `docker exec`), which is most of a plane failover's reaction
time on a busy host, and most of a fault's injection time."""

from __future__ import annotations

import ctypes

from harness.core.errors import LabError
from harness.linux.nsenter import call_in_netns


class Nft:
    def __init__(self) -> None:
        lib = ctypes.CDLL("libnftables.so.1")
        lib.nft_ctx_new.restype = ctypes.c_void_p
        lib.nft_ctx_new.argtypes = [ctypes.c_uint32]
        lib.nft_ctx_buffer_error.argtypes = [ctypes.c_void_p]
        lib.nft_ctx_get_error_buffer.restype = ctypes.c_char_p
        lib.nft_ctx_get_error_buffer.argtypes = [ctypes.c_void_p]
        lib.nft_run_cmd_from_buffer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        lib.nft_ctx_free.argtypes = [ctypes.c_void_p]
        self.lib = lib
        self.ctx = lib.nft_ctx_new(0)
        lib.nft_ctx_buffer_error(self.ctx)

    def run(self, script: str) -> None:
        if self.lib.nft_run_cmd_from_buffer(self.ctx, script.encode()) != 0:
            error = (self.lib.nft_ctx_get_error_buffer(self.ctx) or b"").decode().strip()
            raise LabError(f"nftables refused the ruleset: {error}")

    def close(self) -> None:
        self.lib.nft_ctx_free(self.ctx)


def nft_in_netns(netns_path: str, script: str) -> None:
    """Apply `script` in a namespace from a thread that entered it (its netlink socket is the
    namespace's), with no process forked."""
    def apply() -> None:
        nft = Nft()
        try:
            nft.run(script)
        finally:
            nft.close()
    call_in_netns(netns_path, apply)
