"""Load a topology file: YAML 1.2 -> Python data with a line for every key -> schema.

YAML 1.2 (ruamel.yaml), not 1.1: a node named `no` or `on` stays a name, `1:30` stays text and
`010` is ten, not eight. A constructed document forgets where a value came from and keeps the
last of two duplicate keys, so the loader walks the composed node tree itself: it records the
line of every key path and refuses duplicates. Keys are names, so a plain key is taken as it
is written (`010:` is the node `010`). Schema errors are reported at the line of their key.
"""

from __future__ import annotations

import difflib
import io
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin

from pydantic import BaseModel, ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.constructor import BaseConstructor
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from harness.core.errors import TopologyError, TopologyProblem
from harness.topology.envsubst import expand
from harness.topology.schema import TopologyFile

KeyPath = tuple[str | int, ...]


@dataclass(frozen=True)
class SourceMap:
    """Line numbers (1-based) of every key path in one file."""

    file: str
    lines: dict[KeyPath, int]

    def line_of(self, path: KeyPath) -> int | None:
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get(())

    def problem(self, path: KeyPath, message: str, fix: str = "") -> TopologyProblem:
        return TopologyProblem(message, key=dotted(path), fix=fix, file=self.file,
                               line=self.line_of(path))


def dotted(path: KeyPath) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _key(node: Node) -> str | None:
    """A mapping key as the name it is: the text of a scalar, as written."""
    return node.value if isinstance(node, ScalarNode) and node.value != "" else None


def _walk(constructor: BaseConstructor, node: Node, path: KeyPath, src: SourceMap,
          problems: list[TopologyProblem]) -> Any:
    src.lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, MappingNode):
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = _key(key_node)
            if key is None:
                problems.append(TopologyProblem(
                    "a key here must be a plain name", key=dotted(path), file=src.file,
                    line=key_node.start_mark.line + 1, fix="write a name such as leaf1"))
                continue
            child = (*path, key)
            if key in result:
                problems.append(TopologyProblem(
                    f"duplicate key {key!r} (first at line {src.lines[child]})",
                    key=dotted(child), file=src.file, line=key_node.start_mark.line + 1,
                    fix="YAML keeps only the last one; rename or remove one of them"))
                continue
            src.lines[child] = key_node.start_mark.line + 1
            result[key] = _walk(constructor, value_node, child, src, problems)
        return result
    if isinstance(node, SequenceNode):
        return [_walk(constructor, item, (*path, i), src, problems)
                for i, item in enumerate(node.value)]
    return constructor.construct_object(node, deep=True)


def parse_yaml(text: str, file: str) -> tuple[Any, SourceMap]:
    src = SourceMap(file, {})
    yaml = YAML(typ="safe", pure=True)
    problems: list[TopologyProblem] = []
    try:
        node = yaml.compose(text)
        data = None if node is None else _walk(yaml.constructor, node, (), src, problems)
    except YAMLError as exc:
        mark = exc.problem_mark if isinstance(exc, MarkedYAMLError) else None
        reason = (exc.problem if isinstance(exc, MarkedYAMLError) else None) or str(exc)
        raise TopologyError([TopologyProblem(
            f"not valid YAML: {reason}", file=file, line=mark.line + 1 if mark else None,
            fix="check indentation and quoting near that line")]) from exc
    if problems:
        raise TopologyError(problems)
    return data, src


def _tags(model: type[BaseModel]) -> set[str]:
    """The values that tag `model` in a union: its one-valued Literal fields (`do: exec`)."""
    return {get_args(f.annotation)[0] for f in model.model_fields.values()
            if get_origin(f.annotation) is Literal and len(get_args(f.annotation)) == 1}


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models inside an annotation such as `NodeSpec`, `list[LinkSpec]`, `X | None` or
    a tagged union of steps."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]


def _through_tags(model: type[BaseModel], loc: KeyPath
                  ) -> tuple[KeyPath, list[type[BaseModel]]]:
    """pydantic puts a tagged union's tag in an error's location (setup.0.exec.cmd) where the
    file has no key; the location as written, and the models a key below it belongs to."""
    path: list[str | int] = []
    models = [model]
    for part in loc:
        if isinstance(part, str) and not any(part in m.model_fields for m in models):
            tagged = [m for m in models if part in _tags(m)]
            if tagged:
                models = tagged
                continue
        path.append(part)
        if isinstance(part, str):
            field = next((m.model_fields[part] for m in models if part in m.model_fields), None)
            if field is not None:  # else a user's own key (a node name): same model below it
                models = _models_in(field.annotation)
    return tuple(path), models


def _allowed_keys(model: type[BaseModel], loc: KeyPath) -> list[str]:
    """The keys the schema accepts where `loc` ends, for 'did you mean' suggestions."""
    _, models = _through_tags(model, loc[:-1])
    return list(dict.fromkeys(f.alias or name for m in models
                              for name, f in m.model_fields.items()))


def schema_problems(exc: ValidationError, src: SourceMap,
                    model: type[BaseModel] = TopologyFile) -> list[TopologyProblem]:
    """Each of pydantic's errors at the file, line and key it came from, with a fix."""
    problems = []
    for err in exc.errors():
        loc: KeyPath = tuple(err["loc"])
        path, _ = _through_tags(model, loc)
        if err["type"] == "extra_forbidden":
            bad = str(path[-1])
            options = _allowed_keys(model, loc)
            close = difflib.get_close_matches(bad, options, n=1, cutoff=0.6)
            fix = f"did you mean '{close[0]}'?" if close else (
                f"allowed keys here: {', '.join(options)}" if options else "remove it")
            problems.append(src.problem(path, f"unknown key '{bad}'", fix))
        elif err["type"] == "missing":
            problems.append(src.problem(path[:-1], f"missing required key '{path[-1]}'",
                                        f"add '{path[-1]}:'"))
        else:
            message = err["msg"].removeprefix("Value error, ")
            problems.append(src.problem(path, message, _fix_for(err)))
    return problems


def _fix_for(err: Any) -> str:
    if err["type"] == "enum":
        options = [o.strip(" '") for o in err["ctx"]["expected"].replace(" or ", ",").split(",")]
        close = difflib.get_close_matches(str(err["input"]), options, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        return hint + f"use one of: {', '.join(options)}"
    if err["type"] == "string_pattern_mismatch":
        return "use letters, digits, '-' and '_' only, starting with a letter or digit"
    return ""


@dataclass(frozen=True)
class LoadedTopology:
    spec: TopologyFile
    source: SourceMap


def load_text(text: str, file: str = "<topology>",
              env: Mapping[str, str] | None = None) -> LoadedTopology:
    """`env` (default: this process's environment) fills containerlab's `${VAR:=default}`."""
    data, src = parse_yaml(expand(text, os.environ if env is None else env, file), file)
    if not isinstance(data, dict):
        raise TopologyError([TopologyProblem(
            "a topology file is a mapping with 'name' and 'topology'", file=file, line=1,
            fix="start the file with 'name: mylab' and a 'topology:' section")])
    try:
        spec = TopologyFile.model_validate(data)
    except ValidationError as exc:
        raise TopologyError(schema_problems(exc, src)) from None
    return LoadedTopology(spec, src)


M = TypeVar("M", bound=BaseModel)


def load_model(path: Path, model: type[M], what: str, shape: str, fix: str,
               **extra: Any) -> tuple[M, SourceMap]:
    """One of the project's other YAML files (an exercise, a scenario) as `model`, with
    `extra` keys set: every problem at its file, line and key, as a topology's. `shape` says
    what the file is, `fix` what to give instead of a file that cannot be read."""
    try:
        data, src = parse_yaml(path.read_text(), str(path))
    except (OSError, UnicodeDecodeError) as exc:
        raise TopologyError([TopologyProblem(f"cannot read file: {exc}", file=str(path),
                                             fix=fix)], what) from None
    except TopologyError as exc:
        raise TopologyError(exc.problems, what) from None
    if not isinstance(data, dict):
        raise TopologyError([TopologyProblem(shape, file=str(path))], what)
    try:
        return model.model_validate({**data, **extra}), src
    except ValidationError as exc:
        raise TopologyError(schema_problems(exc, src, model), what) from None


def dump_yaml(data: Any) -> str:
    """YAML 1.2 text that `load_text` reads back as `data` (generators and exports)."""
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = None
    yaml.width = 100
    yaml.sort_base_mapping_type_on_output = False
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()


def topology_in(folder: Path) -> Path | None:
    """The topology file a folder stands for, as containerlab picks it: its one *.clab.yml,
    else its one .yml with a `topology:` section (a folder's other YAML, such as a project's
    mkdocs.yml or CI file, is not a lab); None when it holds neither."""
    for pattern in ("*.clab.y*ml", "*.y*ml"):
        found = sorted(p for p in folder.glob(pattern) if p.suffix in (".yml", ".yaml")
                       and (pattern.startswith("*.clab") or _has_topology_section(p)))
        if len(found) > 1:
            raise TopologyError([TopologyProblem(
                f"{len(found)} topology files match {pattern}: "
                f"{', '.join(p.name for p in found)}", file=str(folder),
                fix="name the file itself")])
        if found:
            return found[0]
    return None


def _has_topology_section(path: Path) -> bool:
    try:
        return re.search(r"(?m)^topology\s*:", path.read_text(errors="replace")) is not None
    except OSError:
        return False


def load_file(path: str | Path) -> LoadedTopology:
    """A topology file, or a folder holding one (containerlab's `-t folder/`)."""
    path = Path(path)
    if path.is_dir():
        found = topology_in(path)
        if found is None:
            raise TopologyError([TopologyProblem(
                "a folder with no topology file (*.clab.yml or *.yml) in it", file=str(path),
                fix="name a topology file, or a folder holding one")])
        path = found
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise TopologyError([TopologyProblem(f"cannot read file: {exc}", file=str(path),
                                             fix="pass the path of a topology .yml")]) from exc
    return load_text(text, str(path))
