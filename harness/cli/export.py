"""export: a lab (deployed, or a topology file) as containerlab or clabernetes files."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.console import make_console
from harness.cli.labref import add_lab_arguments, is_topology, open_lab
from harness.core.errors import LabError, UsageError
from harness.runtime import images
from harness.topology.export import export_clab, export_clabernetes, left_behind
from harness.topology.pipeline import plan_from_file

out = make_console()


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("export", help="write a lab as a containerlab topology (--format "
                            "clab) or a clabernetes Topology manifest (--format clabernetes)")
    add_lab_arguments(p, "the lab to export")
    p.add_argument("--format", choices=("clab", "clabernetes"), default="clab")
    p.add_argument("-o", "--output", metavar="DIR", help="folder to write (default: LAB-FORMAT)")
    p.add_argument("--namespace", default="default", help="Kubernetes namespace (clabernetes)")
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
    topology = args.topology or (args.name if args.name and is_topology(Path(args.name)) else
                                 None)
    plan = plan_from_file(topology) if topology else open_lab(args.name).plan
    try:
        files = export_clab(plan, image_references()) if args.format == "clab" else \
            export_clabernetes(plan, image_references(), args.namespace)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    folder = Path(args.output or f"{plan.name}-{args.format}")
    for relative, text in files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    out.print(f"wrote {len(files)} files to {folder}/ (topology: "
              f"{folder / next(iter(files))})")
    for line in left_behind(plan):
        out.print(f"left behind: {line}", highlight=False)
    return 0
