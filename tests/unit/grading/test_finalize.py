"""finalize: the late policy against the student's own due date, then the overrides, always
recomputed from what grading gave, so that it can run again on a kept result; the points
audit holds it to the identities."""

from __future__ import annotations

import copy
from datetime import timedelta

import pytest
from factories import ROOT

from grader.batch.audit import result_problems, staff_problems
from grader.core.course import load_course
from grader.core.results import AssignmentResult, Environment, GradeResult
from grader.core.results import TestResult as Case
from grader.core.staff import Override, Staff, load_staff
from grader.grading.finalize import OVERRIDE_NOT_APPLIED, finalize

COURSE = load_course(ROOT)
DUE = COURSE.assignment("m9_roofline").due


def graded(student="ada", late_hours: float = 30.0) -> GradeResult:
    """A grading of m9_roofline as grade_submission returns it, before the staff's data."""
    tests = [
        Case("public/test_num_params", 2.0, 2.0, "passed", functions=["num_params"]),
        Case("hidden/test_kv[1]", 0.0, 1.5, "failed", "got 3", "hidden", 0.1, ["kv"]),
        Case("hidden/test_kv[2]", 1.5, 1.5, "passed", "", "hidden", 0.1, ["kv"]),
    ]
    a = AssignmentResult("m9_roofline", 3.5, 5.0, raw_score=3.5, tests=tests)
    when = (DUE + timedelta(hours=late_hours)).isoformat()
    r = GradeResult(student, 3.5, 5.0, Environment("cpu", True), [a], timestamp=when)
    return finalize(r, COURSE)


def test_an_extension_takes_a_late_penalty_off(tmp_path):
    r = graded()  # 30 h late: two started days, 20%
    [a] = r.assignments
    assert (a.late_penalty, a.raw_score, a.score) == (0.2, 3.5, 2.75)
    folder = tmp_path / "staff"
    folder.mkdir()
    (folder / "extensions.toml").write_text(
        '[[extension]]\nstudent = "ada"\nassignment = "m9_roofline"\nhours = 48\n'
    )
    finalize(r, COURSE, load_staff(folder, COURSE))
    assert (a.late_penalty, a.score, r.score) == (0.0, 3.5, 3.5)
    assert a.extended_due == (DUE + timedelta(hours=48)).isoformat()
    assert result_problems(r) == []
    finalize(r, COURSE)  # the extension withdrawn: the penalty is back
    assert (a.late_penalty, a.score, a.extended_due) == (0.2, 2.75, None)


def o(test=None, value=1.5, remove=False, at="2026-12-22T09:00:00+00:00") -> Override:
    return Override("ada", "m9_roofline", test, value, "the test was wrong", "lecturer", at,
                    remove, "staff/overrides.toml:3")  # fmt: skip


def test_a_tests_override_survives_a_regrade_and_its_removal_restores_the_graded_score():
    staff = Staff(log=(o("hidden/test_kv[1]"),))
    r = finalize(graded(), COURSE, staff)
    [a] = r.assignments
    t = a.tests[1]
    assert (t.score, t.override["auto_score"], t.override["points"]) == (1.5, 0.0, 1.5)
    assert (a.raw_score, a.score) == (5.0, 4.0)  # the late penalty applies to the new raw score
    assert result_problems(r) == [] and staff_problems({"ada": r}, staff) == []
    again = finalize(copy.deepcopy(r), COURSE, staff)  # a kept result, finalized again
    assert again.to_dict() == r.to_dict()
    fresh = graded()  # the test changed: grading now gives it a different score; it still holds
    fresh.assignments[0].tests[1].score = 0.5
    assert finalize(fresh, COURSE, staff).assignments[0].tests[1].score == 1.5
    gone = Staff(log=(o("hidden/test_kv[1]"), o("hidden/test_kv[1]", None, remove=True)))
    finalize(r, COURSE, gone)
    assert (t.score, t.override, a.raw_score, a.score) == (0.0, None, 3.5, 2.75)


def test_an_assignment_override_sets_the_score_the_late_policy_gave():
    staff = Staff(log=(o(None, 4.875),))
    r = finalize(graded(), COURSE, staff)
    [a] = r.assignments
    assert (a.score, r.score, a.override["auto_score"], a.raw_score) == (4.875, 4.875, 2.75, 3.5)
    assert result_problems(r) == [] and staff_problems({"ada": r}, staff) == []
    a.score = 2.75  # a result whose override was lost: the audit says so
    assert any("not raw" in p or "is not" in p for p in result_problems(r))


@pytest.mark.parametrize(
    ("decision", "why"),
    [(o("hidden/test_renamed"), "has no test"), (o("hidden/test_kv[2]", 2.0), "worth 1.5"),
     (o(None, 5.5), "worth 5")],
)  # fmt: skip
def test_an_override_that_cannot_apply_says_so_and_the_audit_reports_it(decision, why):
    staff = Staff(log=(decision,))
    r = finalize(graded(), COURSE, staff)
    [warning] = [w for w in r.warnings if w.startswith(OVERRIDE_NOT_APPLIED)]
    assert why in warning and "staff/overrides.toml:3" in warning
    assert r.assignments[0].score == 2.75  # nothing applied
    [problem] = staff_problems({"ada": r}, staff)
    assert problem.startswith("staff/overrides.toml:3: the override of ada/m9_roofline")
    finalize(r, COURSE, staff)
    assert len([w for w in r.warnings if w.startswith(OVERRIDE_NOT_APPLIED)]) == 1
