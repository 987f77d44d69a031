#!/usr/bin/env python3
"""Build the container images (images/switch, images/host) without any registry.

Each image is a Debian rootfs made by mmdebstrap from the Debian mirror apt already uses
(cached by its package list, so a rebuild after a code change takes seconds), imported with
`docker import`, plus a layer with the project's code, the pyroute2 it runs with and the
prebuilt impairment engine. Tags carry the project and FRR versions and the code's hash
(harness/runtime/images.py finds the image of this checkout by that hash).

    images/build.py [switch] [host] [--rebuild-rootfs]
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

import pyroute2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness.core.build import REPO, built
from harness.links.impair.engine import ENGINE as IMPAIR_ENGINE
from harness.nodes.bfd.offload import ENGINE as BFD_ENGINE
from harness.nodes.port.engine import ENGINE as PORT_ENGINE
from harness.nodes.rdma.engine import ENGINE as RDMA_ENGINE
from harness.nodes.switch.sai.srv6_engine import ENGINE as SRV6_ENGINE
from harness.runtime.images import IMAGES, REPOSITORY, source_hash
from harness.spray.probe import ENGINE as PROBE_ENGINE

SUITE = "bookworm"
CACHE = Path("/var/cache/fabric-lab/rootfs")
# Documentation and man pages are dropped: nobody reads them inside a lab node.
DPKG_EXCLUDES = ("path-exclude=/usr/share/doc/*", "path-exclude=/usr/share/man/*",
                 "path-exclude=/usr/share/locale/*", "path-include=/usr/share/doc/*/copyright")


def packages(image: str) -> list[str]:
    lines = (REPO / "images" / image / "packages").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def rootfs(image: str, rebuild: bool) -> Path:
    """The cached rootfs tarball for this package list, built when missing. Tarballs of the
    image's earlier package lists (~200 MB each) and a crashed build's partial one go."""
    key = hashlib.sha256(" ".join([SUITE, *packages(image)]).encode()).hexdigest()[:12]
    tarball = CACHE / f"{image}-{SUITE}-{key}.tar"
    for old in CACHE.glob(f"{image}-{SUITE}-*.tar"):
        if old != tarball:
            old.unlink()
    if tarball.exists() and not rebuild:
        print(f"{image}: rootfs cached ({tarball})")
        return tarball
    if shutil.which("mmdebstrap") is None:
        sys.exit("mmdebstrap is missing: apt-get install mmdebstrap (or run `make images`)")
    CACHE.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    partial = tarball.with_suffix(".partial.tar")
    subprocess.run(["mmdebstrap", "--quiet", "--variant=minbase", "--format=tar",
                    f"--include={','.join(packages(image))}",
                    *(f"--dpkgopt={opt}" for opt in DPKG_EXCLUDES),
                    SUITE, str(partial)], check=True)
    partial.rename(tarball)
    print(f"{image}: rootfs built in {time.monotonic() - started:.1f} s "
          f"({tarball.stat().st_size / 2**20:.0f} MiB)")
    return tarball


def frr_version(tarball: Path) -> str:
    with tarfile.open(tarball) as tar:
        member = tar.extractfile("./var/lib/dpkg/status")
        assert member is not None
        status = member.read().decode()
    for block in status.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if fields.get("Package") == "frr":
            return fields["Version"].split("-")[0]
    sys.exit(f"{tarball} has no frr package")


def docker(*argv: str) -> str:
    return subprocess.run(["docker", *argv], check=True, capture_output=True,
                          text=True).stdout.strip()


def project_layer(context: Path) -> None:
    """The code nodes run (agent, sprayer, traffic), its pyroute2, and the C engines."""
    lib, bin_dir = context / "lib", context / "bin"
    shutil.copytree(REPO / "harness", lib / "harness",
                    ignore=shutil.ignore_patterns("__pycache__", "*.c", "*.h", "templates"))
    shutil.copytree(Path(pyroute2.__file__).parent, lib / "pyroute2",
                    ignore=shutil.ignore_patterns("__pycache__"))
    bin_dir.mkdir()
    for engine in (IMPAIR_ENGINE, BFD_ENGINE, PROBE_ENGINE, SRV6_ENGINE, PORT_ENGINE,
                   RDMA_ENGINE):
        shutil.copy2(built(engine), bin_dir / engine)
    shutil.copy2(REPO / "images" / "Dockerfile", context / "Dockerfile")


def build(image: str, rebuild_rootfs: bool) -> None:
    started = time.monotonic()
    tarball = rootfs(image, rebuild_rootfs)
    frr = frr_version(tarball)
    base = f"{REPOSITORY}/{image}-rootfs:{tarball.stem.rsplit('-', 1)[1]}"
    if subprocess.run(["docker", "image", "inspect", base], capture_output=True).returncode:
        docker("import", str(tarball), base)
    tag = f"{REPOSITORY}/{image}:{version('fabric-lab')}-frr{frr}-{source_hash()}"
    with tempfile.TemporaryDirectory(prefix="fabric-lab-image.") as tmp:
        project_layer(Path(tmp))
        docker("build", "--quiet", "--build-arg", f"BASE={base}", "--build-arg",
               f"SOURCE={source_hash()}", "--build-arg", f"FRR={frr}", "-t", tag, tmp)
    size = int(docker("image", "inspect", "--format", "{{.Size}}", tag))
    print(f"{image}: {tag} built in {time.monotonic() - started:.1f} s, "
          f"{size / 1e6:.0f} MB")
    prune(f"{REPOSITORY}/{image}", keep=tag)
    prune(f"{REPOSITORY}/{image}-rootfs", keep=base)  # after the tags built on them


def prune(repository: str, keep: str) -> None:
    """Drop the tags earlier builds left; docker refuses (and we let it) those a container
    still runs."""
    tags = docker("images", "--filter", f"reference={repository}:*", "--format",
                  "{{.Repository}}:{{.Tag}}").splitlines()
    for old in (t for t in tags if t != keep):
        subprocess.run(["docker", "rmi", old], capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("images", nargs="*", metavar="IMAGE",
                        help=f"what to build: {', '.join(IMAGES)} (default: all)")
    parser.add_argument("--rebuild-rootfs", action="store_true",
                        help="build the Debian rootfs again instead of using the cached one")
    args = parser.parse_args()
    unknown = set(args.images) - set(IMAGES)
    if unknown:
        parser.error(f"no image {', '.join(sorted(unknown))}; images: {', '.join(IMAGES)}")
    for image in args.images or IMAGES:
        build(image, args.rebuild_rootfs)


if __name__ == "__main__":
    main()
