"""`grader override`: an instructor's decision on a student's points, checked and recorded in the
staff's log (grader.core.staff, `overrides.toml`), with who decided and when.

What is checked before anything is written: the student id, the assignment (course.toml's), the
points (whole eighths, at least 0, at most the assignment's), the test (a test function of that
assignment's suites, `suite/name` or `name`, with or without a parametrized case `[...]`), and,
for `--remove`, that there is a standing override to undo. The decision is applied by
`grader.grading.finalize` wherever grading applies the late policy.
"""

from __future__ import annotations

import ast
import getpass
import subprocess
from pathlib import Path

from grader.core import points
from grader.core.course import Course
from grader.core.staff import (
    STUDENT_ID,
    Override,
    StaffError,
    append_override,
    load_staff,
    now_iso,
    staff_folder,
)

SUITES = ("public", "hidden")


def suite_tests(root: Path, assignment: str) -> dict[str, set[str]]:
    """{suite: the test functions its files define} for one assignment (read with `ast`)."""
    found: dict[str, set[str]] = {}
    for suite in SUITES:
        names: set[str] = set()
        for path in sorted((Path(root) / "tests" / suite / assignment).rglob("test_*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            names |= {
                n.name
                for n in ast.walk(tree)
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                and n.name.startswith("test")
            }
        found[suite] = names
    return found


def check_test(root: Path, assignment: str, name: str) -> None:
    """`name` is a test of the assignment's suites; else a StaffError listing where it looked."""
    suite, _, rest = name.partition("/")
    if not rest:
        suite, rest = "", name
    function = rest.split("[", 1)[0]
    tests = suite_tests(root, assignment)
    if suite and suite not in tests:
        raise StaffError(f"--test {name!r}: {suite!r} is not a suite (public, hidden)")
    where = [suite] if suite else list(SUITES)
    if not any(function in tests[s] for s in where):
        raise StaffError(
            f"--test {name!r}: no test {function!r} in tests/{'|'.join(where)}/{assignment}/; "
            "name it as the report does (e.g. hidden/test_name or hidden/test_name[case])"
        )


def who_decides(root: Path) -> str:
    """git's user.email in the course repository, else the login: who `grader override` records."""
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), "config", "user.email"],
            capture_output=True, text=True, timeout=10, check=False,
        )  # fmt: skip
        email = proc.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        email = ""
    return email or getpass.getuser()


def record_override(
    course: Course,
    student: str,
    assignment: str,
    *,
    test: str | None,
    value: float | None,
    reason: str,
    remove: bool = False,
    folder: Path | None = None,
    by: str | None = None,
) -> tuple[Path, Override]:
    """Check one decision and append it to the staff's log; (the log's path, the decision)."""
    folder = staff_folder(course.root, folder)
    if not STUDENT_ID.fullmatch(student):
        raise StaffError(f"{student!r} is not a student id (letters, digits, . _ -)")
    course.assignment(assignment)  # CourseError naming the assignments
    if remove and value is not None:
        raise StaffError("--remove undoes the standing override: give no --points")
    if not remove and value is None:
        raise StaffError("give --points (the assignment's score, or with --test that test's)")
    if value is not None and (value < 0 or points.stored(value) != value):
        raise StaffError(f"--points {value:g}: points are whole eighths, at least 0 (e.g. 2.5)")
    if test is not None:
        check_test(course.root, assignment, test)
    if remove:
        standing = load_staff(folder, course).overrides(student)
        if (assignment, test) not in standing:
            what = f"test {test!r} of {assignment}" if test else assignment
            raise StaffError(f"{student} has no standing override of {what} to remove")
    decision = Override(
        student, assignment, test, value, reason.strip(), by or who_decides(course.root),
        now_iso(), remove,
    )  # fmt: skip
    return append_override(folder, course, decision), decision
