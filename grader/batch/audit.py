"""The points audit: after a batch, every output says the same numbers, and they add up.

For each student of a graded batch (`out/<student>/result.json`) it checks the identities of
grader.core.points, exactly (points are whole eighths, so no tolerance is needed or allowed):

- in result.json: a test's score is on the grid and within 0..its points (an overridden test's
  is its override's points); an assignment's raw score is the sum of its tests' scores; its
  score is what the late policy leaves of the raw score (`points.after_penalty`), or, when the
  staff overrode it, the override's points; the total is the sum of the assignments' scores,
  the maximum the sum of their maxima;
- against the staff's data: every standing override of a graded student and assignment is
  applied in its result.json (one that names no test of the grading is a problem to fix);
- in the gradebook, as `nbgrader export` prints it (raw, unformatted): raw score, penalty and
  score equal result.json's, raw - penalty == score, with no float noise in what it prints;
- in grades.csv (what an LMS imports): the same three numbers.

A problem here is the grader's own bug, never a student's: grade-all prints each one and exits
non-zero, so it is seen before grades are published.
"""

from __future__ import annotations

import csv
from pathlib import Path

from grader.core import points
from grader.core.results import GradeResult, TestResult
from grader.core.staff import Staff
from grader.gradebook import nbgrader_rows
from grader.grading.finalize import find_test


def _on_grid(x: float) -> bool:
    return points.stored(x) == x


def result_problems(r: GradeResult) -> list[str]:
    """The identities inside one result.json."""
    out = []
    who = r.student
    for a in r.assignments:
        for t in a.tests:
            if not _on_grid(t.score) or not 0 <= t.score <= t.max_score:
                out.append(f"{who}/{a.id}/{t.name}: score {t.score!r} of {t.max_score!r}")
        if a.tests and points.total(t.score for t in a.tests) != a.raw_score:
            out.append(f"{who}/{a.id}: raw score {a.raw_score!r} is not the sum of its tests")
        for t in a.tests:
            if t.override is not None and t.override.get("points") != t.score:
                out.append(f"{who}/{a.id}/{t.name}: score {t.score!r} is not its override's")
        expected: float | None
        expected, _ = points.after_penalty(a.raw_score, a.late_penalty)
        if a.override is not None:
            if a.override.get("auto_score") != expected:
                out.append(f"{who}/{a.id}: override's auto_score is not what grading gave")
            expected = a.override.get("points")
        if a.tests and expected != a.score:
            out.append(
                f"{who}/{a.id}: score {a.score!r} is not raw {a.raw_score!r} less "
                f"{a.late_penalty:.0%} ({expected!r})"
            )
    if points.total(a.score for a in r.assignments) != r.score:
        out.append(f"{who}: total {r.score!r} is not the sum of the assignments' scores")
    if points.total(a.max_score for a in r.assignments) != r.max_score:
        out.append(f"{who}: maximum {r.max_score!r} is not the sum of the assignments' maxima")
    return out


def staff_problems(results: dict[str, GradeResult], staff: Staff) -> list[str]:
    """Each standing override of a student and assignment in `results` that is not applied there
    (it names no test of the grading, or more points than the test is worth)."""
    out = []
    for student, r in results.items():
        by_id = {a.id: a for a in r.assignments}
        for (assignment, test), o in staff.overrides(student).items():
            a = by_id.get(assignment)
            if a is None:
                continue
            found = a.override if test is None else _test_override(a.tests, test)
            if found is None or found.get("points") != o.points or found.get("at") != o.at:
                what = "its score" if test is None else f"test {test!r}"
                out.append(f"{o.where}: the override of {student}/{assignment} {what} is not "
                           "applied (see the warnings of its result.json)")  # fmt: skip
    return out


def _test_override(tests: list[TestResult], name: str) -> dict | None:
    test = find_test(tests, name)
    return test.override if test is not None else None


def _rows_problems(
    where: str, rows: list[dict[str, str]], results: dict[str, GradeResult], exact_text: bool
) -> list[str]:
    out = []
    for row in rows:
        r = results.get(row.get("student_id", ""))
        if r is None:
            continue
        a = next((x for x in r.assignments if x.id == row.get("assignment")), None)
        if a is None or not a.tests:
            continue
        want: dict[str, float | str] = {
            "raw_score": a.raw_score,
            "late_submission_penalty": a.raw_score - a.score,
            "score": a.score,
        }
        if "extended_due" in row:  # grades.csv's own column (nbgrader's export has none)
            want["extended_due"] = a.extended_due or ""
        for key, value in want.items():
            text = row.get(key, "")
            if isinstance(value, str):
                if text != value:
                    out.append(f"{where}: {r.student}/{a.id} {key} is {text!r}, result.json "
                               f"says {value!r}")  # fmt: skip
                continue
            try:
                got = float(text)
            except ValueError:
                out.append(f"{where}: {r.student}/{a.id} {key} {text!r} is not a number")
                continue
            if got != value or (exact_text and text != repr(float(value))):
                out.append(f"{where}: {r.student}/{a.id} {key} is {text}, result.json says {value}")
    return out


def audit(out_dir: Path, staff: Staff | None = None) -> list[str]:
    """Every points identity broken in the batch folder `out_dir` ([] when all hold), and every
    override of `staff` its results do not carry."""
    out_dir = Path(out_dir)
    results: dict[str, GradeResult] = {}
    problems: list[str] = []
    for path in sorted(out_dir.glob("*/result.json")):
        try:
            r = GradeResult.read(path)
        except (OSError, ValueError, TypeError, KeyError):
            continue  # an unreadable result is the batch's error row, reported there
        results[r.student] = r
        problems += result_problems(r)
    if staff is not None:
        problems += staff_problems(results, staff)
    db = out_dir / "gradebook.db"
    if db.is_file():
        problems += _rows_problems("nbgrader export", nbgrader_rows(db), results, True)
    listing = out_dir / "grades.csv"
    if listing.is_file():
        with listing.open(newline="", encoding="utf-8") as fh:
            problems += _rows_problems("grades.csv", list(csv.DictReader(fh)), results, False)
    return problems
