"""An operator exercise: a story, a lab broken on purpose, hints, and checks of the trainee's fix.

One YAML file in labs/ per exercise, named by its file. `setup` breaks the lab the way the
story tells (faults, misconfigurations, SAI faults); `checks` say what a working lab does, so
any fix that makes the lab work passes, not only the reference one in `solution`, which the
tests apply to prove every exercise can be solved. Strings in steps and checks are Jinja
templates over the deployed lab's plan (`harness/training/template.py`). Errors name the file,
line and key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.core.errors import TopologyError, TopologyProblem
from harness.topology.loader import load_model

SHIPPED = Path(__file__).resolve().parents[2] / "labs"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# -- steps: what setup and solution do ------------------------------------------------------

class Vtysh(_Strict):
    """Configuration lines, entered in `configure terminal` on each node."""
    do: Literal["vtysh"]
    nodes: str = Field(description="names or patterns, comma-separated")
    lines: list[str] = Field(min_length=1)


class Exec(_Strict):
    """A shell command run inside each node."""
    do: Literal["exec"]
    nodes: str
    cmd: str


class Sai(_Strict):
    """A request to each switch agent's control socket, as `labctl sai` sends
    (e.g. {cmd: fault, action: shrink, table: routes, size: 12})."""
    do: Literal["sai"]
    nodes: str
    request: dict[str, Any]


class SaiDocument(_Strict):
    """Attributes set in a switch's configuration document (sai-config.json), then applied,
    as an operator does with an editor and `labctl sai NODE apply`."""
    do: Literal["sai-document"]
    node: str
    set: dict[str, dict[str, Any]] = Field(description="OBJECT_KEY: {ATTRIBUTE: value}")


class Flap(_Strict):
    """A link that keeps going down and up (a dirty connector) until the lab is destroyed: a
    loop inside `node` taking its ports towards `toward` down and up."""
    do: Literal["flap"]
    node: str
    toward: str
    down_s: float = Field(2.0, gt=0)
    up_s: float = Field(4.0, gt=0)


class Settle(_Strict):
    """Wait until every BGP session of these nodes is Established again (after a reset), so
    what the exercise shows is the lab's steady state, not its churn."""
    do: Literal["settle"]
    nodes: str = "*"
    timeout_s: float = Field(60.0, gt=0)


Step = Annotated[Vtysh | Exec | Sai | SaiDocument | Flap | Settle, Field(discriminator="do")]


# -- checks: what a working lab does ----------------------------------------------------------

class Sessions(_Strict):
    """Every BGP session of these nodes is Established."""
    check: Literal["sessions"]
    nodes: str = "*"


class Spray(_Strict):
    """Every FPF host sprays to every other over all of its planes."""
    check: Literal["spray"]


class Reach(_Strict):
    """`from` pings the loopback of every node `to` names, and hears back."""
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    check: Literal["reach"]
    source: str = Field(alias="from")
    to: str
    family: Literal[4, 6] = 4


class SaiRoutes(_Strict):
    """Each switch's agent holds every route zebra gave it: none failed (TABLE_FULL, ...)."""
    check: Literal["sai-routes"]
    nodes: str


class Dampened(_Strict):
    """`node` has suppressed (RFC 2439) the IPv4 loopback routes of the nodes `prefixes_of`
    names: damping is on and caught the flapping."""
    check: Literal["dampened"]
    node: str
    prefixes_of: str


Check = Annotated[Sessions | Spray | Reach | SaiRoutes | Dampened,
                  Field(discriminator="check")]


class Exercise(_Strict):
    name: str = Field("", description="the file's name without .yml; also the lab's name")
    title: str
    topology: str = Field(description="the topology file, relative to this one")
    story: str
    setup: list[Step] = Field(min_length=1)
    hints: list[str] = Field(min_length=1)
    checks: list[Check] = Field(min_length=1)
    solution: list[Step] = Field(min_length=1)
    broken_within_s: float = Field(30.0, gt=0, description="after setup, checks fail by then")
    fixed_within_s: float = Field(60.0, gt=0, description="after a fix, checks pass by then")
    source: str = ""

    @property
    def topology_file(self) -> Path:
        return Path(self.source).parent / self.topology


def load_exercise(path: str | Path) -> Exercise:
    path = Path(path)
    what = "exercise"
    exercise, src = load_model(
        path, Exercise, what, "an exercise is a mapping (title, story, setup, hints, checks, "
        "solution)", "name an exercise of `labctl exercise list` or the path of an exercise "
        ".yml", name=path.stem, source=str(path))
    if not exercise.topology_file.is_file():
        raise TopologyError([TopologyProblem(
            f"no file {exercise.topology_file}", key="topology", file=str(path),
            line=src.line_of(("topology",)), fix="a topology file's path, relative to the "
            "exercise (e.g. ../topologies/clos.yml)")], what)
    return exercise


def shipped() -> list[Path]:
    return sorted(SHIPPED.glob("*.yml"))


def find_exercise(name: str) -> Exercise:
    """A shipped exercise by name, or any exercise file by path."""
    path = SHIPPED / f"{name}.yml"
    return load_exercise(path if "/" not in name and path.is_file() else name)
