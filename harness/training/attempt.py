"""A trainee's attempt at an exercise, kept in the lab's directory: which exercise the lab
runs, when it started and how many hints were shown, so any shell can ask for the next hint
or check the fix, and destroy takes it with the lab."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from harness.core.errors import LabError
from harness.core.paths import lab_dir
from harness.deploy.lab import Lab, lab_names
from harness.training.exercise import Exercise, load_exercise

ATTEMPT_FILE = "exercise.json"


@dataclass(frozen=True)
class Attempt:
    exercise: str  # the exercise file
    started: float  # time.time()
    hints_shown: int = 0
    solved_after_s: float | None = None

    def save(self, lab: Lab) -> None:
        (lab.dir / ATTEMPT_FILE).write_text(json.dumps(asdict(self)))

    def load_exercise(self) -> Exercise:
        return load_exercise(self.exercise)

    def next_hint(self, lab: Lab) -> Attempt:
        shown = replace(self, hints_shown=self.hints_shown + 1)
        shown.save(lab)
        return shown

    def solved(self, lab: Lab) -> Attempt:
        if self.solved_after_s is not None:
            return self
        done = replace(self, solved_after_s=round(time.time() - self.started, 1))
        done.save(lab)
        return done


def begin(lab: Lab, exercise: Exercise) -> Attempt:
    attempt = Attempt(exercise=str(Path(exercise.source).resolve()), started=time.time())
    attempt.save(lab)
    return attempt


def running() -> list[str]:
    """Labs that run an exercise."""
    return [name for name in lab_names() if (lab_dir(name) / ATTEMPT_FILE).is_file()]


def open_attempt(name: str | None) -> tuple[Lab, Attempt]:
    """The exercise lab `name`, or the only one running."""
    if name is None:
        names = running()
        if len(names) != 1:
            raise LabError("name the exercise: " + (", ".join(names) or "none is running; "
                                                     "`labctl exercise start NAME` starts one"))
        name = names[0]
    path = lab_dir(name) / ATTEMPT_FILE
    if not path.is_file():
        raise LabError(f"no exercise runs as lab {name!r}; running: "
                       f"{', '.join(running()) or 'none'}")
    return Lab.open(name), Attempt(**json.loads(path.read_text()))
