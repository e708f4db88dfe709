"""The staff's decisions applied to a graded result: the late policy against the student's own
due date (an extension moves it), then the instructor's overrides.

`finalize` works from what grading found, never from what an earlier `finalize` left: each
test's score as grading gave it (an overridden test keeps it as `override.auto_score`) and the
trusted submission time (`GradeResult.timestamp`). So it can run again on a kept result after
the staff's data changed (grade-all does, for every student it keeps) and gives the same result
as a fresh grading would: an override survives every regrade, a removed one is gone, a new
extension takes the penalty off. The points identities it keeps (grader.core.points,
grader.batch.audit):

- an overridden test scores the override's points (whole eighths, at most the test's maximum);
- the raw score is the sum of the tests' scores;
- the score is what the late policy leaves of the raw score, with the student's due date,
  unless the assignment's score is overridden: then it is the override's points, and what the
  tests and the late policy gave is kept as `override.auto_score`.

An override that names no test of the grading, or more points than its test is worth, is not
applied and says so in the result's warnings (prefix `OVERRIDE_NOT_APPLIED`); the points audit
reports it as a problem to fix.
"""

from __future__ import annotations

from datetime import datetime

from grader.core import points
from grader.core.course import Course
from grader.core.late import late_penalty, parse_timestamp
from grader.core.results import AssignmentResult, GradeResult, TestResult
from grader.core.staff import Override, Staff

OVERRIDE_NOT_APPLIED = "override not applied: "


def finalize(result: GradeResult, course: Course, staff: Staff | None = None) -> GradeResult:
    """Apply the late policy (with the student's extension) and the overrides to `result`, in
    place, from the tests' graded scores; returns it."""
    staff = staff or Staff()
    submitted = parse_timestamp(result.timestamp) if result.timestamp else None
    standing = staff.overrides(result.student)
    problems: list[str] = []
    for a in result.assignments:
        _restore(a)
        for (assignment, test), decision in standing.items():
            if assignment == a.id and test is not None:
                problems += _override_test(a, decision)
        ext = staff.extension(result.student, a.id)
        due = ext.due if ext is not None else course.assignment(a.id).due
        a.extended_due = ext.due.isoformat() if ext is not None else None
        late(a, due, submitted, course)
        whole = standing.get((a.id, None))
        if whole is not None:
            problems += _override_assignment(a, whole)
        a.feedback_policy = course.assignment(a.id).feedback
        a.hidden_feedback, a.feedback_until = "full", None
    result.score = points.total(a.score for a in result.assignments)
    result.max_score = points.total(a.max_score for a in result.assignments)
    result.warnings = [w for w in result.warnings if not w.startswith(OVERRIDE_NOT_APPLIED)]
    result.warnings += problems
    return result


def late(a: AssignmentResult, due: datetime, submitted: datetime | None, course: Course) -> None:
    """The late policy on one assignment: raw score the sum of its tests, score what the penalty
    leaves of it (score + penalty points == raw score, exactly: grader.core.points)."""
    a.raw_score = points.total(t.score for t in a.tests)
    a.late_penalty = late_penalty(due, submitted, course.late_policy)
    a.score, _ = points.after_penalty(a.raw_score, a.late_penalty)


def _restore(a: AssignmentResult) -> None:
    """Undo an earlier `finalize`'s overrides: each test's and the assignment's graded score."""
    for t in a.tests:
        if t.override is not None:
            t.score = float(t.override["auto_score"])
            t.override = None
    a.override = None


def find_test(tests: list[TestResult], name: str) -> TestResult | None:
    """The test an override names: `suite/name` exactly, or `name` alone when one suite has it."""
    exact = [t for t in tests if t.name == name]
    if exact:
        return exact[0]
    bare = [t for t in tests if t.name.split("/", 1)[-1] == name]
    return bare[0] if len(bare) == 1 else None


def _override_test(a: AssignmentResult, decision: Override) -> list[str]:
    test = find_test(a.tests, decision.test or "")
    if test is None:
        return [
            f"{OVERRIDE_NOT_APPLIED}{decision.where}: {a.id} has no test {decision.test!r} in "
            "this grading (renamed or removed?); correct the override or remove it"
        ]
    value = float(decision.points or 0.0)
    if value > test.max_score:
        return [
            f"{OVERRIDE_NOT_APPLIED}{decision.where}: {points.shown(value)} points for "
            f"{test.name}, which is worth {points.shown(test.max_score)}"
        ]
    test.override = {**decision.record(), "auto_score": test.score}
    test.score = points.stored(value)
    return []


def _override_assignment(a: AssignmentResult, decision: Override) -> list[str]:
    value = float(decision.points or 0.0)
    if value > a.max_score:
        return [
            f"{OVERRIDE_NOT_APPLIED}{decision.where}: {points.shown(value)} points for {a.id}, "
            f"which is worth {points.shown(a.max_score)}"
        ]
    a.override = {**decision.record(), "auto_score": a.score}
    a.score = points.stored(value)
    return []


def unapplied(result: GradeResult) -> list[str]:
    """The overrides `finalize` could not apply to `result` (its warnings say why)."""
    return [w for w in result.warnings if w.startswith(OVERRIDE_NOT_APPLIED)]
