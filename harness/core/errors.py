"""The error types a user sees: each carries where the problem is and how to fix it."""

from __future__ import annotations


class FabricLabError(Exception):
    """Base of every error labctl reports to a user without a traceback."""


class TopologyProblem(FabricLabError):
    """One problem in a topology file, pinned to the file, line and key that caused it."""

    def __init__(self, message: str, *, key: str = "", fix: str = "", file: str = "",
                 line: int | None = None) -> None:
        self.message, self.key, self.fix, self.file, self.line = message, key, fix, file, line
        super().__init__(str(self))

    def located(self, file: str, line: int | None) -> TopologyProblem:
        return TopologyProblem(self.message, key=self.key, fix=self.fix, file=file,
                               line=self.line if self.line is not None else line)

    def __str__(self) -> str:
        where = self.file or "<topology>"
        if self.line is not None:
            where += f":{self.line}"
        text = f"{where}: {self.key + ': ' if self.key else ''}{self.message}"
        return text + (f"\n    fix: {self.fix}" if self.fix else "")


class TopologyError(FabricLabError):
    """Every problem found in one topology file (or another file the lab reads: `what`);
    nothing was created."""

    def __init__(self, problems: list[TopologyProblem], what: str = "topology") -> None:
        self.problems, self.what = problems, what
        super().__init__(str(self))

    def __str__(self) -> str:
        head = f"{len(self.problems)} problem(s) in {self.what}; nothing was created"
        return "\n".join([head, *(f"  {p}" for p in self.problems)])


class LabError(FabricLabError):
    """A lab could not be deployed, found or destroyed."""


class UsageError(FabricLabError):
    """The command line itself is wrong (exit code 2, as argparse's own errors)."""


class CheckFailed(LabError):
    """A lab did what it was asked but a check failed: convergence timed out, a probe
    failed (exit code 1)."""
