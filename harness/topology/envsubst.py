"""Environment variables in a topology file, expanded as containerlab does before parsing.

containerlab runs the file's text through envsubst: `${VAR}` is the variable's value,
`${VAR:=default}` and `${VAR:-default}` fall back when it is unset or empty, `${VAR=default}`
and `${VAR-default}` only when it is unset. A bare `$VAR` is left alone, so shell variables in
`exec` commands survive. Expansion stays within a line, so every line number still holds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from harness.core.errors import TopologyError, TopologyProblem

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
REFERENCE = re.compile(r"\$\{(?P<body>[^}\n]*)(?P<close>\}?)")
_BODY = re.compile(rf"^(?P<name>{_NAME})(?:(?P<op>:?[=-])(?P<default>.*))?$", re.S)


def _problem(file: str, text: str, start: int, message: str, fix: str) -> TopologyProblem:
    return TopologyProblem(message, file=file, line=text.count("\n", 0, start) + 1, fix=fix)


def expand(text: str, env: Mapping[str, str], file: str) -> str:
    """`text` with every `${...}` replaced; a malformed reference is an error at its line."""
    problems: list[TopologyProblem] = []

    def replace(match: re.Match[str]) -> str:
        whole = match.group(0)
        if not match.group("close"):
            problems.append(_problem(file, text, match.start(), f"unterminated {whole!r}",
                                     "close it with '}', e.g. ${VAR:=default}"))
            return whole
        body = _BODY.match(match.group("body"))
        if body is None:
            problems.append(_problem(
                file, text, match.start(), f"{whole!r} is not a variable reference",
                "write ${NAME}, ${NAME:=default} or ${NAME:-default} (NAME: letters, "
                "digits, '_')"))
            return whole
        value = env.get(body.group("name"))
        op = body.group("op")
        if op is None:
            return value or ""
        unset = value is None or (op.startswith(":") and value == "")
        return body.group("default") if unset else value  # type: ignore[return-value]

    result = REFERENCE.sub(replace, text)
    if problems:
        raise TopologyError(problems)
    return result
