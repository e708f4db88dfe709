"""What a student's PR report shows of the hidden tests under each feedback policy, before and
after their own due date; the points never change, only what is said about them."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta

import pytest
from factories import ROOT

from grader.batch.audit import result_problems
from grader.core.course import load_course
from grader.core.results import AssignmentResult, Environment, GradeResult, KernelMemory
from grader.core.results import TestResult as Case
from grader.core.staff import Extension, Staff
from grader.core.visibility import held, student_view
from grader.reports.common import notes
from grader.reports.markdown import markdown

BASE = load_course(ROOT)
DUE = BASE.assignment("m9_roofline").due
SECRET = "expected 295.2 for cfg=llama-7b"


def course(policy: str):
    assignments = tuple(
        dataclasses.replace(a, feedback=policy) if a.id == "m9_roofline" else a
        for a in BASE.assignments
    )
    return dataclasses.replace(BASE, assignments=assignments)


def result() -> GradeResult:
    tests = [
        Case("public/test_ridge", 1.0, 1.0, "passed", "", "public", 0.1, ["ridge"]),
        Case("public/test_kv_public", 0.0, 1.0, "failed", "public says why", "public", 0.1, ["kv"]),
        Case("hidden/test_kv_random[1]", 0.0, 1.5, "failed", SECRET, "hidden", 0.2, ["kv"]),
        Case("hidden/test_kv_random[2]", 1.5, 1.5, "passed", "", "hidden", 0.2, ["kv"]),
        Case("hidden/test_record_llama", 2.0, 2.0, "passed", "", "hidden", 0.3,
             ["m9_record", "num_params"]),
        Case("hidden/test_metrics_conclusion", 0.0, 1.0, "failed", "conclusion wrong", "hidden",
             0.1, ["metrics.json"]),
    ]  # fmt: skip
    # a hidden test's profiled launch: its description shows that test's input
    memory = [KernelMemory("strided_copy", f"[2, 32] on float16[1024] {SECRET}", {"version": 1})]
    a = AssignmentResult("m9_roofline", 4.5, 8.0, raw_score=4.5, tests=tests, memory=memory)
    return GradeResult("ada", 4.5, 8.0, Environment("cpu", True), [a])


@pytest.mark.parametrize("policy", ["hidden-after-due", "score-only"])
def test_before_the_due_date_the_hidden_tests_show_a_score_per_graded_function(policy):
    view = student_view(result(), course(policy), DUE - timedelta(hours=1), Staff())
    [a] = view.assignments
    names = [t.name for t in a.tests]
    assert names == ["public/test_ridge", "public/test_kv_public", "hidden/kv",
                     "hidden/m9_record, num_params", "hidden/metrics.json"]  # fmt: skip
    kv = a.tests[2]
    assert (kv.score, kv.max_score, kv.outcome) == (1.5, 3.0, "failed")
    assert kv.feedback.startswith("2 hidden tests of kv: 1 passed, 1.5 / 3 points")
    assert a.tests[1].feedback == "public says why"  # public tests in full
    text = json.dumps(view.to_dict()) + markdown(view, course(policy))
    for secret in (SECRET, "test_kv_random", "test_record_llama", "conclusion wrong"):
        assert secret not in text
    assert result_problems(view) == [] and (a.score, a.raw_score) == (4.5, 4.5)
    assert a.memory == []  # the hidden tests' profiled launches wait with their feedback
    if policy == "hidden-after-due":
        assert (a.hidden_feedback, a.feedback_until) == ("held", DUE.isoformat())
        assert held(view) == [a]
        assert any("until your due date, 2026-12-21 23:59 UTC" in n for n in notes(a))
    else:
        assert (a.hidden_feedback, a.feedback_until, held(view)) == ("scores", None, [])


def test_after_the_due_date_everything_is_shown_and_an_extension_moves_that_time():
    after = DUE + timedelta(hours=1)
    view = student_view(result(), course("hidden-after-due"), after, Staff())
    tests = result().to_dict()["assignments"][0]["tests"]
    assert view.to_dict()["assignments"][0]["tests"] == tests
    assert view.assignments[0].hidden_feedback == "full" and view.assignments[0].memory
    ext = Extension("ada", "m9_roofline", DUE + timedelta(hours=48))
    staff = Staff(extensions={("ada", "m9_roofline"): ext})
    view = student_view(result(), course("hidden-after-due"), after, staff)
    assert view.assignments[0].hidden_feedback == "held"
    assert view.assignments[0].feedback_until == ext.due.isoformat()
    later = student_view(result(), course("score-only"), DUE + timedelta(days=30), Staff())
    assert later.assignments[0].hidden_feedback == "scores"  # score-only: never more


def test_full_shows_everything_and_the_original_is_untouched():
    original = result()
    before = original.to_dict()
    view = student_view(original, course("full"), DUE - timedelta(days=3), Staff())
    assert original.to_dict() == before
    assert view.assignments[0].tests == original.assignments[0].tests
    assert (view.assignments[0].hidden_feedback, view.assignments[0].feedback_policy) == (
        "full",
        "full",
    )


@pytest.mark.parametrize("policy", ["hidden-after-due", "score-only", "full"])
def test_a_view_that_holds_hidden_feedback_shows_no_time_the_hidden_tests_made(policy):
    """Student code may sleep as long as a hidden input says (docs/PRIVACY.md): the hidden
    entries have no duration and the grading's total is left out of the view and its reports;
    the public tests' durations stay (they ran before any hidden test)."""
    from grader.reports.common import env_line

    graded = dataclasses.replace(result(), duration_s=12.5)
    view = student_view(graded, course(policy), DUE - timedelta(hours=1), Staff())
    [a] = view.assignments
    public = [t.duration_s for t in a.tests if t.suite == "public"]
    hidden = [t.duration_s for t in a.tests if t.suite == "hidden"]
    assert public == [0.1, 0.1]
    if policy == "full":
        assert hidden == [0.2, 0.2, 0.3, 0.1] and view.duration_s == 12.5
        assert env_line(view).endswith("12.5 s")
        return
    assert hidden == [0.0, 0.0, 0.0] and view.duration_s == 0
    assert not env_line(view).endswith(" s")
    assert "12.5" not in markdown(view, course(policy))
