"""Run a containerlab node's own commands (exec, cmd, `labctl exec`) on a runtime that shares
the host's filesystem, without letting them change it or reach the host's daemons.

A containerlab lab's commands were written for a container: `sed -i ... /etc/frr/daemons`,
`vtysh -b`, `apk add`. On netns they would edit the host or configure the host's own FRR.
So they run in a mount namespace of their own (unshared here, slave to the host's) where:
every mount is read-only; /tmp, /var/tmp and /run are private tmpfs (no host sockets: not the
host's FRR, not docker's); /etc/frr is the node's own (the image's defaults, then its binds);
/run/frr holds the node's FRR sockets, so a plain `vtysh` talks to the node's daemons as in
the container; the node's binds are mounted as the file asks (rw or ro); /proc/sys/net (the
node's own network namespace) stays writable for `sysctl -w`. Any mount that fails stops the
command before it runs: it fails closed.

    python -m harness.runtime.sandbox [--bind SRC:DST[:ro]]... [--frr-run DIR] -- ARGV...
"""

from __future__ import annotations

import argparse
import ctypes
import os
import stat
import sys
from pathlib import Path

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_NOATIME, MS_NODIRATIME = 0x20, 0x1000, 0x400, 0x800
MS_RELATIME, MS_STRICTATIME, MS_REC = 0x200000, 0x1000000, 0x4000
KEPT_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC,
              "noatime": MS_NOATIME, "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME,
              "strictatime": MS_STRICTATIME}
SCRATCH = ("/tmp", "/var/tmp", "/run")
NODE_SYSCTLS = "/proc/sys/net"
FRR_ETC, FRR_RUN = "/etc/frr", "/run/frr"
# What an FRR image's /etc/frr holds before the lab's binds cover it (frr.conf comes from them).
FRR_ETC_DEFAULTS = {"vtysh.conf": "service integrated-vtysh-config\n"}
CLONE_NEWNS, MS_SLAVE = 0x20000, 0x80000
_libc = ctypes.CDLL(None, use_errno=True)


def _mount(source: str | None, target: str, fstype: str | None, flags: int) -> None:
    rc = _libc.mount(source and source.encode(), target.encode(), fstype and fstype.encode(),
                     ctypes.c_ulong(flags), None)
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def mounts() -> list[tuple[str, int]]:
    """(mount point, flags to keep) of every mount this namespace sees, parents first."""
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            point = fields[4].encode().decode("unicode_escape")
            flags = sum(KEPT_FLAGS.get(o, 0) for o in fields[5].split(","))
            found.append((point, flags))
    return found


def confine(binds: list[str], frr_run: str | None) -> None:
    if _libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
    _mount(None, "/", None, MS_REC | MS_SLAVE)  # nothing mounted here reaches the host
    daemons_file = Path(FRR_ETC, "daemons")
    frr_daemons = daemons_file.read_text() if daemons_file.exists() else None
    # Sources are held open: /tmp or /run may hold them and are covered below.
    frr_sockets = os.open(frr_run, os.O_PATH) if frr_run else None
    sources = [(os.open(source, os.O_PATH), target, mode)
               for source, target, *mode in (b.split(":") for b in binds)]
    for point, flags in mounts():
        try:
            _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
        except OSError:
            if os.path.exists(point) and os.statvfs(point).f_flag & os.ST_RDONLY:
                continue  # read-only already
            if not os.path.exists(point):
                continue  # hidden under another mount: unreachable anyway
            raise
    for path in SCRATCH:
        _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV)
    _mount(NODE_SYSCTLS, NODE_SYSCTLS, None, MS_BIND)
    _mount(None, NODE_SYSCTLS, None, MS_REMOUNT | MS_BIND)  # writable again
    if frr_daemons is not None:
        _mount("tmpfs", FRR_ETC, "tmpfs", MS_NOSUID | MS_NODEV)
        for name, text in {"daemons": frr_daemons, **FRR_ETC_DEFAULTS}.items():
            with open(f"{FRR_ETC}/{name}", "w") as f:
                f.write(text)
    if frr_sockets is not None:
        os.mkdir(FRR_RUN)
        _mount(f"/proc/self/fd/{frr_sockets}", FRR_RUN, None, MS_BIND)
        os.close(frr_sockets)
    for fd, target, mode in sources:
        _make_target(fd, target)
        _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
        if mode == ["ro"]:
            _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
        os.close(fd)


def _make_target(source_fd: int, target: str) -> None:
    """A bind's target inside one of the private tmpfs (e.g. /etc/frr/frr.conf) is created
    like its source; elsewhere the read-only host has it or the mount fails."""
    path = Path(target)
    if path.exists():
        return
    try:
        if stat.S_ISDIR(os.fstat(source_fd).st_mode):
            path.mkdir(parents=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
    except OSError:
        pass  # on the read-only host: the mount below says so


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="sandbox")
    parser.add_argument("--bind", action="append", default=[])
    parser.add_argument("--frr-run", help="the node's FRR socket directory, shown at /run/frr")
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    try:
        confine(args.bind, args.frr_run)
    except OSError as exc:
        sys.exit(f"sandbox: {exc}; the command was not run")
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
