"""Container images of the docker runtime: which image a node runs, and whether the one built
is current. Images are built locally by images/build.py (`make images`); no registry.

An image carries the project's code, so it is tied to the checkout that built it: its label
`fabric-lab.source` is a hash of that code, and a lab refuses an image from another checkout
instead of running an agent that differs from the one the tests read.
"""

from __future__ import annotations

import hashlib
from functools import cache

from harness.core.build import REPO
from harness.core.errors import LabError
from harness.runtime import docker_engine
from harness.runtime.base import NodeImage
from harness.topology.plan import NodePlan

REPOSITORY = "fabric-lab"
IMAGES = ("switch", "host")
SOURCE_LABEL = "fabric-lab.source"
# What an image carries from the checkout: the code run inside nodes and the image recipe.
SOURCES = ("harness/**/*.py", "harness/**/*.c", "harness/**/*.h", "images/*/packages",
           "images/Dockerfile")


@cache
def source_hash() -> str:
    digest = hashlib.sha256()
    for pattern in SOURCES:
        for path in sorted(REPO.glob(pattern)):
            digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def image_for(node: NodePlan, image: NodeImage) -> tuple[str, str | None]:
    """The image a node runs, and a note when it is not the one the file names: with no
    registry, a containerlab lab's images (frrouting/frr, alpine...) become the ones built
    here, FRR's with the lab's own daemons and config."""
    if node.image is None or node.image.startswith(f"{REPOSITORY}/"):
        return node.image or image.built, None
    return image.built, (f"{node.name}: image {node.image} -> {image.built} (built here; runs "
                         f"{image.runs or 'its exec and cmd'})")


def resolve(reference: str) -> str:
    """'fabric-lab/switch' -> the tag built from this checkout; other references as given.
    Raises a LabError saying what to run when that image is missing or stale."""
    if not reference.startswith(f"{REPOSITORY}/") or ":" in reference:
        return reference
    tags = docker_engine.image_labels(reference)
    for tag, labels in tags.items():
        if labels.get(SOURCE_LABEL) == source_hash():
            return tag
    found = f" (found {', '.join(tags)}, built from another checkout)" if tags else ""
    raise LabError(f"image {reference} for this checkout (source {source_hash()}) is not "
                   f"built{found}: run `make images`")
