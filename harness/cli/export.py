"""export: a lab (deployed, or a topology file) as containerlab or clabernetes files."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.console import make_console
from harness.cli.labref import add_lab_arguments, is_topology, open_lab
from harness.core.errors import LabError, UsageError
from harness.runtime import docker_engine, images
from harness.topology.export import (
    IMAGES_TARBALL,
    IMPAIRMENTS_SCRIPT,
    LOAD_SCRIPT,
    export_clab,
    export_clabernetes,
    image_kind,
    in_registry,
    left_behind,
    load_script,
    netem_flags,
    used_images,
)
from harness.topology.pipeline import plan_from_file

out = make_console()


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("export", help="write a lab as a containerlab topology (--format "
                            "clab) or a clabernetes Topology manifest (--format clabernetes)")
    add_lab_arguments(p, "the lab to export")
    p.add_argument("--format", choices=("clab", "clabernetes"), default="clab")
    p.add_argument("-o", "--output", metavar="DIR", help="folder to write (default: LAB-FORMAT)")
    p.add_argument("--namespace", default="default", help="Kubernetes namespace (clabernetes)")
    p.add_argument("--images", action="store_true", help=f"also write the images the lab runs "
                   f"({IMAGES_TARBALL}, built here: `make images`) and {LOAD_SCRIPT}, which "
                   "loads them into docker")
    p.add_argument("--registry", metavar="HOST[/PATH]", help=f"with --images: the files name "
                   f"the images in this registry, and {LOAD_SCRIPT} pushes them there")
    p.set_defaults(run=export)


def image_references() -> dict[str, str]:
    """The images built from this checkout when docker has them, else their names."""
    found = {}
    for kind in images.IMAGES:
        reference = f"{images.REPOSITORY}/{kind}"
        try:
            found[kind] = images.resolve(reference)
        except (LabError, OSError):
            found[kind] = reference  # `make images` builds it
    return found


def export(args: argparse.Namespace) -> int:
    if args.registry and not args.images:
        raise UsageError("--registry names where --images pushes the images: give both")
    topology = args.topology or (args.name if args.name and is_topology(Path(args.name)) else
                                 None)
    plan = plan_from_file(topology) if topology else open_lab(args.name).plan
    built = {kind: images.resolve(f"{images.REPOSITORY}/{kind}")  # what it runs, built here
             for kind in {image_kind(node) for node in plan.nodes}} \
        if args.images else image_references()
    named = {kind: in_registry(reference, args.registry) for kind, reference in built.items()} \
        if args.registry else built
    try:
        files = export_clab(plan, named) if args.format == "clab" else \
            export_clabernetes(plan, named, args.namespace)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    folder = Path(args.output or f"{plan.name}-{args.format}")
    if args.images:
        saved = used_images(plan, built)
        files[LOAD_SCRIPT] = load_script(saved, args.registry)
    write(folder, files)
    if args.images:
        docker_engine.save_images(saved, folder / IMAGES_TARBALL)
    out.print(f"wrote {len(files)} files to {folder}/ (topology: "
              f"{folder / next(iter(files))})")
    if IMPAIRMENTS_SCRIPT in files:
        impaired = sum(bool(netem_flags(link.impairment)) for link in plan.links)
        out.print(f"the impairments of {impaired} links: {folder / IMPAIRMENTS_SCRIPT} sets them "
                  "after `containerlab deploy` (containerlab tools netem; the host needs "
                  "sch_netem)", highlight=False)
    if args.images:
        mib = (folder / IMAGES_TARBALL).stat().st_size / 2**20
        out.print(f"and the images, {mib:.0f} MiB: {folder / IMAGES_TARBALL}; "
                  f"{folder / LOAD_SCRIPT} " + (f"pushes them to {args.registry}" if
                                                args.registry else "loads them into docker"),
                  highlight=False)
    for line in left_behind(plan, netem=args.format == "clab"):
        out.print(f"left behind: {line}", highlight=False)
    return 0


def write(folder: Path, files: dict[str, str]) -> None:
    """The export's files under `folder`, its scripts executable."""
    try:
        for relative, text in files.items():
            path = folder / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            if path.suffix == ".sh":
                path.chmod(0o755)
    except OSError as exc:
        raise LabError(f"cannot write the export to {folder}/: {exc.strerror} "
                       f"({exc.filename}); give -o a folder you can write") from None
