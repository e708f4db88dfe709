"""Release: from `solutions/` to the student's `exercises/`, proven leak-free, and what ships.

`solutions/<id>/<id>.py` is the only place answers are written. One module per job:

- `validate`: read a solution source and name every problem with its file and line;
- `build`: the student notebook, through nbgrader's preprocessors in a declarative `PIPELINE`
  (`StubSolutions` names the function each stub stands for);
- `swap`: `release` stages every assignment, proves it and swaps it into `exercises/`, or with
  `check` only compares;
- `leak`: the leak proof, no line of a solution region or hidden test in a released tree;
- `export`: `export_student`, the repository students fork;
- `verify`: the instructor's one-stop proof that the course is ready;
- `tree`: walking and copying course trees the same way for each of them.

Instructor tooling only: the student export leaves this package out (`INSTRUCTOR_MODULES`).
"""

from __future__ import annotations

# What the command and the tests import from the package; the rest is imported from its module.
from grader.release.build import PIPELINE, StubSolutions
from grader.release.export import ExportError, export_student
from grader.release.leak import is_generic, leak_check
from grader.release.swap import check, release
from grader.release.tree import INSTRUCTOR_MODULES
from grader.release.verify import stated_rules, verify

__all__ = [
    "INSTRUCTOR_MODULES",
    "PIPELINE",
    "ExportError",
    "StubSolutions",
    "check",
    "export_student",
    "is_generic",
    "leak_check",
    "release",
    "stated_rules",
    "verify",
]
