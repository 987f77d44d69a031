"""Enter or create a network namespace from a short-lived thread instead of a forked child.

setns(2) and unshare(2) with CLONE_NEWNET change only the calling thread, and sockets and
/proc/sys/net files opened by that thread belong to its namespace. So creating a namespace,
opening a netlink socket in it or writing its sysctls costs microseconds, not a fork.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import subprocess
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from pyroute2 import netns as pyroute2_netns

from harness.core.errors import LabError

if TYPE_CHECKING:
    from pyroute2.iproute import IPRoute

CLONE_NEWNET = 0x40000000
MNT_DETACH = 2
NETNS_RUN_DIR = "/run/netns"
_libc = ctypes.CDLL(None, use_errno=True)
T = TypeVar("T")


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _in_new_thread(fn: Callable[[], T]) -> T:
    """Run fn in a fresh thread (whose namespace changes die with it) and return its result."""
    result: dict[str, object] = {}

    def target() -> None:
        try:
            result["value"] = fn()
        except BaseException as exc:  # re-raised in the caller's thread
            result["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]  # type: ignore[misc]
    return result["value"]  # type: ignore[return-value]


def _setns(netns_path: str) -> None:
    fd = os.open(netns_path, os.O_RDONLY)
    try:
        _check(_libc.setns(fd, CLONE_NEWNET), f"setns({netns_path})")
    finally:
        os.close(fd)


def call_in_netns(netns_path: str, fn: Callable[[], T]) -> T:
    def entered() -> T:
        _setns(netns_path)
        return fn()
    return _in_new_thread(entered)


def _write_sysctls_here(values: dict[str, str]) -> None:
    """A key already at its value is left alone: inside a container /proc/sys is read-only,
    and its runtime set there at creation what the node needs."""
    for key, value in values.items():
        path = "/proc/sys/" + key.replace(".", "/")
        try:  # opening it for writing fails on a read-only /proc/sys
            with open(path) as f:
                if f.read().strip() == value:
                    continue
        except PermissionError:  # a key that only takes writes (net.ipv4.route.flush)
            pass
        with open(path, "w") as f:
            f.write(value)


def rtnl_socket(netns_path: str, sysctls: dict[str, str] | None = None) -> socket.socket:
    """An rtnetlink socket that lives in the given namespace (writing `sysctls` on the way)."""
    def inside() -> socket.socket:
        _write_sysctls_here(sysctls or {})
        return socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, socket.NETLINK_ROUTE)
    return call_in_netns(netns_path, inside)


def netlink(netns_path: str | None = None) -> IPRoute:
    """A pyroute2 handle whose socket lives in the given namespace (None: this thread's).

    pyroute2.iproute is imported here, not at the top: it takes 80 ms, a tenth of a
    100-node deploy, which plain nodes never need."""
    from pyroute2.iproute import IPRoute

    return IPRoute(fileno=rtnl_socket(netns_path).detach()) if netns_path else IPRoute()


def write_sysctls(netns_path: str | None, values: dict[str, str]) -> None:
    """Write `values` in the given namespace (None: this thread's)."""
    if netns_path:
        call_in_netns(netns_path, lambda: _write_sysctls_here(values))
    else:
        _write_sysctls_here(values)


def create_netns(name: str) -> str:
    """Create a named namespace, as `ip netns add` does, and return its path."""

    def unshare_and_pin() -> None:
        _check(_libc.unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)")
        pyroute2_netns.attach(name, pid=f"{os.getpid()}/task/{threading.get_native_id()}")

    _in_new_thread(unshare_and_pin)
    return f"{NETNS_RUN_DIR}/{name}"


def remove_netns(name: str) -> None:
    """Unpin a namespace; it disappears once no process holds it. Tolerates half-made ones."""
    path = f"{NETNS_RUN_DIR}/{name}"
    _libc.umount2(path.encode(), MNT_DETACH)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def list_netns() -> list[str]:
    try:
        return sorted(os.listdir(NETNS_RUN_DIR))
    except FileNotFoundError:
        return []


def run_in(netns_path: str | None, argv: list[str], stdin: str | None = None) -> None:
    """`argv` in the namespace (here when None); LabError with its stderr when it fails."""
    full = ["nsenter", f"--net={netns_path}", *argv] if netns_path else argv
    out = subprocess.run(full, input=stdin, capture_output=True, text=True)
    if out.returncode != 0:
        raise LabError(f"`{' '.join(argv)}` failed: {out.stderr.strip()}")
