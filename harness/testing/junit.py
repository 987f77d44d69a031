"""JUnit XML, as CI dashboards read it: the nightly's own steps and lab stages as test cases,
and one file holding every suite of the run (pytest's own files merged in as they are)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Case:
    classname: str  # the lab, or "nightly" for a step
    stage: str
    seconds: float
    failure: str | None = None
    skipped: str | None = None
    detail: str = ""  # the failure's full text (a traceback, the step's last lines)


def suite(name: str, cases: Sequence[Case]) -> ET.Element:
    element = ET.Element("testsuite", name=name, tests=str(len(cases)),
                         failures=str(sum(bool(c.failure) for c in cases)),
                         skipped=str(sum(bool(c.skipped) for c in cases)), errors="0",
                         time=f"{sum(c.seconds for c in cases):.3f}")
    for c in cases:
        case = ET.SubElement(element, "testcase", classname=c.classname, name=c.stage,
                             time=f"{c.seconds:.3f}")
        if c.failure:
            ET.SubElement(case, "failure", message=c.failure[:500]).text = c.detail or c.failure
        elif c.skipped:
            ET.SubElement(case, "skipped", message=c.skipped)
    return element


def write_suite(path: Path, name: str, cases: Sequence[Case]) -> None:
    ET.ElementTree(suite(name, cases)).write(path, encoding="unicode", xml_declaration=True)


def merge(out: Path, own: ET.Element, files: Iterable[Path]) -> dict[str, int]:
    """`own` and every suite in `files` under one <testsuites>; totals by outcome."""
    root = ET.Element("testsuites", name="fabric-lab nightly")
    root.append(own)
    for path in files:
        parsed = ET.parse(path).getroot()
        root.extend(parsed.iter("testsuite") if parsed.tag == "testsuites" else [parsed])
    totals = {key: sum(int(s.get(key, 0)) for s in root.iter("testsuite"))
              for key in ("tests", "failures", "errors", "skipped")}
    root.attrib.update({k: str(v) for k, v in totals.items()})
    ET.ElementTree(root).write(out, encoding="unicode", xml_declaration=True)
    return totals
