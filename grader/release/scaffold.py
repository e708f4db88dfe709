"""`grader new-assignment ID`: a working assignment to start from, and the shared cells in step.

`new_assignment` writes what a new assignment needs, from `grader/release/templates/`:

- `solutions/<id>/<id>.py`: the solution notebook, its setup cells the shared ones
  (`grader.release.shared_cells`), then a pure function (`reduction_bytes`), a kernel with
  shared memory and barriers (`block_sum`) and its host wrapper that returns a number
  (`gpu_sum`), each with its docstring, its stated rules and its self-check cell;
- `tests/public/<id>/test_<id>_public.py`: public tests, the kernels' sizes and values drawn;
- `tests/public/<id>/profiles.py`: the profiling shapes, so that `grader profile <id>` and
  `grader check` show how the kernel uses memory from the first run;
- `tests/hidden/<id>/test_<id>_hidden.py`: hidden tests (hypothesis and the `rng` fixture,
  compared with the reference) whose docstring lists the "Stated rules";
- its `[[assignments]]` entry in course.toml, after the last one, its points those of the tests.

`grader release <id> && grader verify` passes on it as written; docs/ADDING_AN_ASSIGNMENT.md
walks through making it the assignment you want. It refuses (`ScaffoldError`) an id that is not a
lowercase Python name, one course.toml already has, or a file that exists, and then writes
nothing; course.toml is written last, atomically, and only once the new manifest loads.

`sync_setup` copies the shared setup cells' one text into every solution notebook that has them
(`grader sync-setup`), for when the template changed.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import jupytext

from grader.core.course import CourseError, load_course
from grader.core.errors import UsageError
from grader.core.files import atomic_write
from grader.release import shared_cells
from grader.release.validate import cell_ranges

ID_RE = re.compile(r"[a-z][a-z0-9_]*")
# The threads per block of the scaffold's reduction (`TPB` in its notebook and suites): the
# textbook reduction's 256. The simulator runs any block a GPU accepts (up to 1,024 threads with
# barriers) on one Python thread (grader.simt.simulator), under the sandbox's process limit.
SCAFFOLD_TPB = 256
SETUP_PLACEHOLDER = "__SHARED_SETUP_CELLS__"
_POINTS_RE = re.compile(r"^@pytest\.mark\.points\((\d+)\)", re.MULTILINE)


class ScaffoldError(UsageError):
    """The scaffold was refused; nothing was written."""


@dataclass
class Scaffolded:
    """What `new_assignment` wrote: paths relative to the course root, and the points."""

    assignment: str
    written: list[str]
    points: int


def _template(name: str) -> str:
    return (shared_cells.TEMPLATES / name).read_text(encoding="utf-8")


def _fill(text: str, assignment_id: str, title: str) -> str:
    filled = text.replace("__ASSIGNMENT__", assignment_id).replace("__TITLE__", title)
    return filled.replace("__TPB__", str(SCAFFOLD_TPB))


def template_points() -> int:
    """The points of the template's tests, public and hidden (the new entry's `points`)."""
    return sum(
        int(n)
        for name in ("test_public.py.tmpl", "test_hidden.py.tmpl")
        for n in _POINTS_RE.findall(_template(name))
    )


def _entry(assignment_id: str, title: str, due: str, points: int) -> str:
    return (
        "[[assignments]]\n"
        f'id = "{assignment_id}"\n'
        f"title = {_toml_string(title)}\n"
        f'notebook = "{assignment_id}.ipynb"\n'
        f'due = "{due}"\n'
        f"points = {points}                  # the public and hidden tests' points, added up\n"
        "needs_gpu = false            # kernels run in the simulator without a GPU\n"
        "# [assignments.limits]       # its own time and memory limits, if it needs them:\n"
        '# kernel_timeout_s = 120     # docs/ADDING_AN_ASSIGNMENT.md, "Limits"\n'
    )


def _toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _with_entry(manifest: str, entry: str) -> str:
    """course.toml's text with `entry` after its last [[assignments]] table (and the tables
    that belong to it), before whatever comes next and the comments that introduce it."""
    lines = manifest.split("\n")
    heads = [i for i, line in enumerate(lines) if line.strip() == "[[assignments]]"]
    if not heads:
        return manifest.rstrip("\n") + "\n\n" + entry
    end = len(lines)
    for i in range(heads[-1] + 1, len(lines)):
        s = lines[i].strip()
        if s.startswith("[") and not s.startswith(("[assignments.", "[[assignments.")):
            end = i
            break
    while end > heads[-1] + 1 and (not lines[end - 1].strip() or lines[end - 1].startswith("#")):
        end -= 1
    return "\n".join([*lines[:end], "", entry.rstrip("\n"), *lines[end:]])


def new_assignment(
    root: Path, assignment_id: str, title: str | None = None, due: str | None = None
) -> Scaffolded:
    """Write a new assignment's files and course.toml entry (see the module docstring).

    `title` defaults to the id in words; `due` (ISO 8601 with a zone) to a week after the
    latest due date in course.toml."""
    root = Path(root).resolve()
    course = load_course(root)
    if not ID_RE.fullmatch(assignment_id):
        raise ScaffoldError(
            f"{assignment_id!r} cannot be an assignment id: use a lowercase Python name "
            "(letters, digits and _, starting with a letter), e.g. reduction"
        )
    if assignment_id in course.assignment_ids:
        raise ScaffoldError(f"course.toml already has an assignment {assignment_id!r}")
    title = title or assignment_id.replace("_", " ").capitalize()
    due = due or (max(a.due for a in course.assignments) + timedelta(days=7)).isoformat()
    files = _files(assignment_id, title)
    taken = [rel for rel in files if (root / rel).exists()]
    taken += [
        f"{d}/{assignment_id}/"
        for d in ("solutions", "exercises", "tests/public", "tests/hidden")
        if (root / d / assignment_id).exists()
    ]
    if taken:
        raise ScaffoldError(
            f"{assignment_id}: {', '.join(sorted(set(taken)))} already exist(s); choose another id "
            "or remove them"
        )
    points = template_points()
    manifest = (root / "course.toml").read_text(encoding="utf-8")
    updated = _with_entry(manifest, _entry(assignment_id, title, due, points))
    _check_manifest(root, updated)
    written: list[str] = []
    try:
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text, encoding="utf-8")
            written.append(rel)
    except OSError:
        for rel in written:
            (root / rel).unlink(missing_ok=True)
        raise
    atomic_write(root / "course.toml", updated)
    return Scaffolded(assignment_id, [*written, "course.toml"], points)


def _files(assignment_id: str, title: str) -> dict[str, str]:
    """The new assignment's files (relative path -> text), from the templates."""
    return {
        f"solutions/{assignment_id}/{assignment_id}.py": _fill(
            _template("solution.py.tmpl").replace(
                SETUP_PLACEHOLDER, shared_cells.SETUP_CELLS.read_text(encoding="utf-8").rstrip()
            ),
            assignment_id,
            title,
        ),
        f"tests/public/{assignment_id}/test_{assignment_id}_public.py": _fill(
            _template("test_public.py.tmpl"), assignment_id, title
        ),
        f"tests/public/{assignment_id}/profiles.py": _fill(
            _template("profiles.py.tmpl"), assignment_id, title
        ),
        f"tests/hidden/{assignment_id}/test_{assignment_id}_hidden.py": _fill(
            _template("test_hidden.py.tmpl"), assignment_id, title
        ),
    }


def _check_manifest(root: Path, text: str) -> None:
    """The manifest with the new entry loads (a bad --due or title is refused here)."""
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScaffoldError(f"the new course.toml entry would not be valid TOML: {exc}") from exc
    probe = root / ".course.toml.new-assignment"
    try:
        probe.write_text(text, encoding="utf-8")
        load_course(probe)
    except CourseError as exc:
        raise ScaffoldError(f"the new course.toml entry is refused: {exc}") from exc
    finally:
        probe.unlink(missing_ok=True)


def sync_setup(root: Path, assignment_ids: list[str] | None = None) -> list[str]:
    """Copy the shared setup cells' text into each solution notebook whose copy differs; the
    files rewritten (relative to the course root)."""
    root = Path(root).resolve()
    ids = assignment_ids or load_course(root).assignment_ids
    shared = shared_cells.shared_cells()
    rewritten = []
    for a in ids:
        path = root / "solutions" / a / f"{a}.py"
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        lines = text.split("\n")
        nb = jupytext.reads(text, fmt="py:percent")
        stale = shared_cells.stale(nb)
        ranges = cell_ranges(lines, len(nb.cells))
        if not stale:
            continue
        if ranges is None:
            raise ScaffoldError(f"solutions/{a}/{a}.py: its cells cannot be told apart")
        for k, gid in sorted(stale, reverse=True):
            body = ranges[k][1]
            count = len(nb.cells[k].source.split("\n"))
            lines[body : body + count] = shared[gid].split("\n")
        new = "\n".join(lines)
        if shared_cells.stale(jupytext.reads(new, fmt="py:percent")):
            raise ScaffoldError(f"solutions/{a}/{a}.py: the shared cells could not be copied in")
        atomic_write(path, new)
        rewritten.append(f"solutions/{a}/{a}.py")
    return rewritten
