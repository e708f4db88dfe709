"""How much of the hidden tests a student's pull-request report shows (course.toml's `feedback`
of each assignment), decided once here.

- `full`: every test with its feedback (the staff's view, and every grading outside a PR).
- `hidden-after-due`: until the student's due date (the course's, or their extension's), the
  public tests in full and, for the hidden tests, only the score per graded function; from the
  due date on, everything. The time that decides is the grading's (the trusted clock of the
  machine that grades), not the submission's: a push made before the due date and graded again
  after it (the sweep delivers that: grader.github.sweep) shows its full feedback.
- `score-only`: the hidden tests' scores per graded function, always.

"Per graded function": the hidden tests that called the same functions of the student's
notebook (`TestResult.functions`, recorded by the suites' plugin) are one entry, named after
those functions, with their summed points and an outcome, and no test name, input, expected
value or message. Points are untouched: the sum of the entries is the raw score, as before.
The student's local check (public tests only) is not affected.

Durations: a held or scores-only view carries no time the hidden tests' run makes up (student
code may sleep as long as a hidden input says): the hidden entries have no duration, and the
grading's total is left out (`duration_s` 0, which the reports do not print). The public tests'
durations stay: every public test runs before any hidden one (grader.grading.grade), so nothing
a hidden test gave the student's code is in them. docs/PRIVACY.md lists every channel.
"""

from __future__ import annotations

import copy
from datetime import datetime

from grader.core import points
from grader.core.course import Course
from grader.core.results import AssignmentResult, GradeResult, Outcome, TestResult
from grader.core.staff import Staff

HIDDEN = "hidden"
OTHER = "other checks"


def hidden_feedback(policy: str, due: datetime, now: datetime) -> str:
    """What `policy` shows of the hidden tests at `now` for a student due at `due`: "full",
    "held" (until `due`) or "scores" (`AssignmentResult.hidden_feedback`)."""
    if policy == "full" or (policy == "hidden-after-due" and now >= due):
        return "full"
    return "held" if policy == "hidden-after-due" else "scores"


def student_view(result: GradeResult, course: Course, now: datetime, staff: Staff) -> GradeResult:
    """A copy of `result` as the student may read it at `now` (the module doc says what)."""
    view = copy.deepcopy(result)
    for a in view.assignments:
        due = staff.due(course, view.student, a.id)
        a.feedback_policy = course.assignment(a.id).feedback
        a.hidden_feedback = hidden_feedback(a.feedback_policy, due, now)
        a.feedback_until = due.isoformat() if a.hidden_feedback == "held" else None
        if a.hidden_feedback != "full":
            _scores_only(a)
    if any(a.hidden_feedback != "full" for a in view.assignments):
        view.duration_s = 0.0  # the whole grading's time includes the hidden tests'
    return view


def held(result: GradeResult) -> list[AssignmentResult]:
    """The assignments of a (student) view whose hidden feedback waits for a due date."""
    return [a for a in result.assignments if a.hidden_feedback == "held"]


def _scores_only(a: AssignmentResult) -> None:
    """The hidden tests of `a` replaced by one entry per graded function; the memory profiles
    the hidden tests took go too (their launches show the hidden tests' inputs)."""
    a.memory = []
    public = [t for t in a.tests if t.suite != HIDDEN]
    groups: dict[str, list[TestResult]] = {}
    for t in a.tests:
        if t.suite == HIDDEN:
            groups.setdefault(", ".join(t.functions) or OTHER, []).append(t)
    a.tests = public + [_entry(key, tests, a) for key, tests in groups.items()]


def _entry(key: str, tests: list[TestResult], a: AssignmentResult) -> TestResult:
    outcomes = {t.outcome for t in tests}
    outcome: Outcome = "failed"
    if outcomes == {"passed"} or outcomes == {"skipped"}:
        outcome = "passed" if outcomes == {"passed"} else "skipped"
    score = points.total(t.score for t in tests)
    top = points.total(t.max_score for t in tests)
    when = "until the due date" if a.hidden_feedback == "held" else "in this course"
    return TestResult(
        name=f"{HIDDEN}/{key}",
        score=score,
        max_score=top,
        outcome=outcome,
        feedback=(
            f"{len(tests)} hidden test{'s' if len(tests) != 1 else ''} of {key}: "
            f"{sum(t.outcome == 'passed' for t in tests)} passed, "
            f"{points.fraction(score, top)} points; their feedback is not shown {when}"
        ),
        suite=HIDDEN,
        duration_s=0.0,  # the hidden tests' time is the student code's to set: not shown
        functions=sorted({f for t in tests for f in t.functions}),
    )
