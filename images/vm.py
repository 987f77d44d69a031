#!/usr/bin/env python3
"""Run a command in a VM booted with Debian's stock kernel, for the kernel features this host's
kernel lacks (sch_netem: without it the impairment suites can only test the userspace path).

The VM boots Debian's own kernel (linux-image-amd64) under KVM with a Debian rootfs
(images/vm/packages, built and cached like the container images' ones) as its initramfs. This
checkout and the project's Python are shared read-only over 9p at the paths they have on the
host, so the command runs the same code with the same .venv. The VM has no network device and
no writable share: the serial console, carrying the command's output and exit status, is its
only way out, so nothing it does reaches the host.

    images/vm.py [--cpus N] [--memory MIB] [--timeout S] -- COMMAND [ARG...]
    images/vm.py -- .venv/bin/python -m pytest tests/e2e/test_impair.py
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path
from typing import BinaryIO

from build import CACHE, REPO, rootfs

INIT = Path(__file__).resolve().parent / "vm" / "init"
BOOT_CACHE = CACHE.parent / "vm"
EXIT_LINE = re.compile(r"fabric-lab-vm: exit (\d+)")
CMDLINE_MAX = 2047  # COMMAND_LINE_SIZE on x86, with its NUL


def _cpio_entry(out: BinaryIO, ino: int, name: str, mode: int, data: bytes = b"",
                member: tarfile.TarInfo | None = None) -> None:
    """One entry of the 'newc' cpio format the kernel unpacks an initramfs from."""
    encoded = name.encode() + b"\0"
    fields = (ino, mode, member.uid if member else 0, member.gid if member else 0,
              2 if stat.S_ISDIR(mode) else 1, int(member.mtime) if member else 0, len(data),
              0, 0, member.devmajor if member else 0, member.devminor if member else 0,
              len(encoded), 0)
    out.write(b"070701" + "".join(f"{f:08X}" for f in fields).encode() + encoded)
    out.write(b"\0" * (-(110 + len(encoded)) % 4) + data + b"\0" * (-len(data) % 4))


_TYPES = {tarfile.DIRTYPE: stat.S_IFDIR, tarfile.SYMTYPE: stat.S_IFLNK,
          tarfile.CHRTYPE: stat.S_IFCHR, tarfile.BLKTYPE: stat.S_IFBLK,
          tarfile.FIFOTYPE: stat.S_IFIFO}


def initramfs_from(tarball: Path, out: BinaryIO) -> bytes:
    """Write the rootfs with our /init as an initramfs; return the kernel found in /boot.

    Hard links become copies; Debian's own initrd is left out (the whole rootfs is the
    initramfs)."""
    kernel, ino = b"", 0
    with tarfile.open(tarball) as tar:
        for ino, member in enumerate(tar, start=1):
            name = member.name.removeprefix("./").rstrip("/")
            if not name or name.startswith("boot/initrd.img"):
                continue
            if member.isreg() or member.islnk():
                source = tar.extractfile(member)
                assert source is not None
                data, mode = source.read(), stat.S_IFREG
                if name.startswith("boot/vmlinuz-"):
                    kernel = data
            else:
                data = member.linkname.encode() if member.issym() else b""
                mode = _TYPES[member.type]
            _cpio_entry(out, ino, name, mode | member.mode, data, member)
        _cpio_entry(out, ino + 1, "init", stat.S_IFREG | 0o755, INIT.read_bytes())
    _cpio_entry(out, 0, "TRAILER!!!", 0)
    if not kernel:
        sys.exit(f"{tarball} has no /boot/vmlinuz-*: is linux-image-amd64 in "
                 "images/vm/packages?")
    return kernel


def boot_files(tarball: Path) -> tuple[Path, Path]:
    """The kernel and the initramfs, cached by the rootfs and the init script."""
    key = hashlib.sha256(tarball.name.encode() + INIT.read_bytes()).hexdigest()[:12]
    kernel, initramfs = BOOT_CACHE / f"vmlinuz-{key}", BOOT_CACHE / f"initramfs-{key}.cpio"
    if kernel.exists() and initramfs.exists():
        return kernel, initramfs
    started = time.monotonic()
    BOOT_CACHE.mkdir(parents=True, exist_ok=True)
    for old in BOOT_CACHE.iterdir():  # one VM image at a time: each is ~1 GB
        old.unlink()
    partial = initramfs.with_suffix(".partial")
    with partial.open("wb") as out:
        kernel.write_bytes(initramfs_from(tarball, out))
    partial.rename(initramfs)
    print(f"vm: initramfs built in {time.monotonic() - started:.1f} s "
          f"({initramfs.stat().st_size / 2**20:.0f} MiB)", flush=True)
    return kernel, initramfs


def shares() -> dict[str, Path]:
    """9p tag -> host path: the checkout, and the Python its .venv runs on when that is not
    the VM's own (/usr)."""
    found = {"repo": REPO}
    if not Path(sys.base_prefix).is_relative_to("/usr"):
        found["python"] = Path(sys.base_prefix)
    for path in found.values():
        if re.search(r"[\s,]", str(path)):
            sys.exit(f"cannot share {path} with the VM: its path has a space or a comma")
    return found


def accelerator() -> tuple[list[str], str]:
    """KVM when it can boot a stock kernel; else TCG (software, several times slower).

    A KVM that is PVM (the nested hypervisor of some cloud VMs, module kvm_pvm) boots only
    kernels built as PVM guests: Debian's stops dead after its decompressor."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return ["-accel", "tcg", "-cpu", "max"], "tcg (software): /dev/kvm is not usable"
    if Path("/sys/module/kvm_pvm").exists():
        return ["-accel", "tcg", "-cpu", "max"], ("tcg (software): this host's KVM is PVM, "
                                                  "which boots only PVM guest kernels")
    return ["-accel", "kvm", "-cpu", "host"], "kvm"


def qemu_argv(kernel: Path, initramfs: Path, command: list[str], cpus: int,
              memory: int, accel: list[str]) -> list[str]:
    exported = shares()
    cmdline = " ".join([
        "console=ttyS0", "quiet", "loglevel=3", "panic=-1", "rdinit=/init",
        "flshares=" + ",".join(f"{tag}:{path}" for tag, path in exported.items()),
        f"flcwd={REPO}", "flcmd=" + base64.b64encode(shlex.join(command).encode()).decode()])
    if len(cmdline) > CMDLINE_MAX:
        sys.exit(f"the command is too long for the kernel command line ({len(cmdline)} > "
                 f"{CMDLINE_MAX} characters): put it in a script in the checkout")
    argv = ["qemu-system-x86_64", *accel, "-smp", str(cpus),
            "-m", str(memory), "-nodefaults", "-display", "none", "-serial", "stdio",
            "-no-reboot", "-kernel", str(kernel), "-initrd", str(initramfs),
            "-append", cmdline]
    for tag, path in exported.items():
        argv += ["-virtfs", f"local,path={path},mount_tag={tag},security_model=none,"
                 "readonly=on"]
    return argv


def run(argv: list[str], timeout: float) -> int:
    """Boot, echo the console, and return the command's exit status (124: timed out)."""
    vm = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT)
    assert vm.stdout is not None
    expired = threading.Event()
    timer = threading.Timer(timeout, lambda: (expired.set(), vm.kill()))
    timer.start()
    status = None
    try:
        for raw in vm.stdout:
            line = raw.decode(errors="replace").rstrip("\r\n")
            print(line, flush=True)
            if match := EXIT_LINE.fullmatch(line.strip()):
                status = int(match[1])
    finally:
        timer.cancel()
        vm.kill()
        vm.wait()
    if status is None:
        why = f"killed after {timeout:.0f} s" if expired.is_set() else f"qemu exit {vm.returncode}"
        print(f"vm: the command reported no exit status ({why})")
        return 124 if expired.is_set() else 1
    return status


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     usage="%(prog)s [options] -- COMMAND [ARG...]")
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--memory", type=int, default=4096, metavar="MIB",
                        help="the rootfs lives in it too (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=1800, metavar="S")
    parser.add_argument("--rebuild-rootfs", action="store_true")
    parser.add_argument("command", nargs="+")
    args = parser.parse_args()
    if shutil.which("qemu-system-x86_64") is None:
        sys.exit("images/vm.py needs qemu: apt-get install qemu-system-x86 (or `make nightly`)")
    kernel, initramfs = boot_files(rootfs("vm", args.rebuild_rootfs))
    accel, why = accelerator()
    print(f"vm: accelerator {why}", flush=True)
    return run(qemu_argv(kernel, initramfs, args.command, args.cpus, args.memory, accel),
               args.timeout)


if __name__ == "__main__":
    sys.exit(main())
