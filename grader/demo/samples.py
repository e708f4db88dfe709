"""The bundled sample class, made on demand from solutions/ and exercises/.

Five submissions that show what grading must get right: the reference, an untouched release,
a partly correct one, one that hard-codes answers and metrics.json, and one that hangs. They are
generated rather than committed so they can never drift from the course, and every edit is
chosen from the course itself (`solution_cells`: each assignment's solution cells, in order), so
a course with any assignments has its sample class: the partial one leaves each assignment's last
solution cell a stub (the first assignment's last two), the hard-coded one returns a constant
from each assignment's first host function, the hanging one loops forever in the first
assignment's first host function. The metrics are those of course.toml's `[metrics]` record,
the forged ones its roofline keys with made-up values.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from grader.core.course import Course
from grader.core.regions import SOLUTION, regions
from grader.grading.reference import compute_reference_record

STUB = 'raise NotImplementedError("{name}: not done yet")'


def replace_region(source: str, grade_id: str, body: list[str]) -> str:
    """Replace the solution region of the cell `grade_id` with `body` (indented like it)."""
    lines = source.splitlines()
    header = next(
        (
            i
            for i, line in enumerate(lines)
            if line.startswith("# %%") and f'"grade_id": "{grade_id}"' in line
        ),
        None,
    )
    if header is None:
        raise ValueError(f"no cell with grade_id {grade_id!r}")
    begin, end = next(
        (r.begin, r.end) for r in regions(lines, first=0) if r.kind == SOLUTION and r.begin > header
    )
    indent = re.match(r"\s*", lines[begin]).group(0)  # type: ignore[union-attr]  # \s* matches
    new = [indent + b for b in body]
    return "\n".join(lines[:begin] + new + lines[end + 1 :]) + "\n"


_HEADER_RE = re.compile(r"^# %% nbgrader=(\{.*\})\s*$")


def solution_cells(source: str) -> list[tuple[str, bool]]:
    """(grade_id, is a kernel) of each solution cell of a solution source, in order: its
    nbgrader metadata says ``"solution": true``; a kernel's cell holds ``@cuda.jit``."""
    lines = source.splitlines()
    heads = [(i, m.group(1)) for i, line in enumerate(lines) if (m := _HEADER_RE.match(line))]
    cells = []
    for k, (i, meta) in enumerate(heads):
        try:
            nbgrader = json.loads(meta)
        except json.JSONDecodeError:
            continue
        if nbgrader.get("solution") and isinstance(nbgrader.get("grade_id"), str):
            end = heads[k + 1][0] if k + 1 < len(heads) else len(lines)
            kernel = any("@cuda.jit" in line for line in lines[i:end])
            cells.append((nbgrader["grade_id"], kernel))
    return cells


def _host_cell(source: str) -> str:
    """The first solution cell of `source` that is not a kernel (a host function)."""
    cells = solution_cells(source)
    return next((gid for gid, kernel in cells if not kernel), cells[0][0])


def _reference_metrics(course: Course) -> dict:
    """metrics.json as the reference's notebook writes it (course.toml's `[metrics]` record),
    beside another milestone's key that grading must leave alone."""
    metrics: dict = {"m8_generation": {"tokens_per_s": 41.5}}
    if course.metrics is not None:
        metrics[course.metrics.assignment] = compute_reference_record(course)
    return metrics


def _forged_metrics(course: Course, metrics: dict) -> dict:
    """The reference's record with hand-written intensities: a forgery the suites must refuse."""
    if course.metrics is None:
        return {}
    record = course.metrics.assignment
    forged = {key: 0.5 * 8**n for n, key in enumerate(course.metrics.roofline)}
    return {record: {**metrics[record], **forged}}


def _fork(dest: Path, sources: dict[str, str], metrics: dict | None) -> None:
    for aid, text in sources.items():
        folder = dest / "exercises" / aid
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{aid}.py").write_text(text, encoding="utf-8")
    if metrics is not None:
        (dest / "metrics.json").write_text(json.dumps(metrics, indent=2), encoding="utf-8")


def build_sample_class(course: Course, dest: Path) -> list[str]:
    """Write the sample class into `dest/<student>/` and return the student ids."""
    root = course.root
    solutions = {
        a: (root / "solutions" / a / f"{a}.py").read_text(encoding="utf-8")
        for a in course.assignment_ids
    }
    metrics = _reference_metrics(course)
    if dest.exists():
        shutil.rmtree(dest)

    _fork(dest / "ada_reference", solutions, metrics)

    released = dest / "bob_untouched" / "exercises"
    shutil.copytree(root / "exercises", released)

    ids = course.assignment_ids
    partial = dict(solutions)
    for n, aid in enumerate(ids):
        cells = [gid for gid, _ in solution_cells(partial[aid])]
        for gid in cells[-2:] if n == 0 else cells[-1:]:
            partial[aid] = replace_region(partial[aid], gid, [STUB.format(name=gid)])
    _fork(dest / "cy_partial", partial, metrics)

    cheat = dict(solutions)
    for aid in ids:
        cheat[aid] = replace_region(cheat[aid], _host_cell(cheat[aid]), ["return 42"])
    _fork(dest / "dan_hardcoded", cheat, _forged_metrics(course, metrics))

    hang = dict(solutions)
    first = ids[0]
    hang[first] = replace_region(hang[first], _host_cell(hang[first]), ["while True:", "    pass"])
    _fork(dest / "eve_hangs", hang, metrics)
    return sorted(p.name for p in dest.iterdir())
