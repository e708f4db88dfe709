"""The pytest plugin's scoring: outcomes, feedback and points, on a tiny course of its own."""

from __future__ import annotations

import textwrap

import pytest
from factories import course_tree

from grader.core import device
from grader.suites.runner import run_assignment

ASSIGNMENT = "gpu_fundamentals"  # any id course.toml defines

NOTEBOOK = """\
# %%
def add_one(x):
    return x + 1


def raises_value_error():
    raise ValueError("peak_flops must be positive")


def raises_assertion():
    assert False, "a student's own assertion"


def returns_object():
    return object()


class WorkerTimeout(Exception):  # the student's own class, named like the grader's timeout
    pass


def raises_grader_named():
    raise WorkerTimeout("took longer than 5 s; the worker was stopped")
"""

SUITE = """\
import pytest


@pytest.mark.points(1)
def test_missing(student):
    student.no_such_function(1)


@pytest.mark.points(1)
def test_value_error_mapped(student):
    with pytest.raises(ValueError, match="positive"):
        student.raises_value_error()


@pytest.mark.points(1)
def test_not_plain(student):
    student.returns_object()


@pytest.mark.points(3)
@pytest.mark.parametrize("x", [1, 2, 3])
def test_split(student, x):
    assert student.add_one(x) == x + 1


@pytest.mark.points(2)
def test_wrong(student):
    assert student.add_one(1) == 3, "add_one(1) returned 2; this test wants 3"


@pytest.mark.points(1)
def test_student_assertion_is_not_expected(student):
    with pytest.raises(AssertionError):
        student.raises_assertion()


@pytest.mark.points(1)
def test_grader_named_exception(student):
    student.raises_grader_named()


@pytest.mark.gpu
@pytest.mark.points(1)
def test_gpu_only(student):
    assert student.add_one(0) == 1
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = course_tree(
        tmp_path_factory.mktemp("course"),
        {
            f"solutions/{ASSIGNMENT}/{ASSIGNMENT}.py": NOTEBOOK,
            f"tests/public/{ASSIGNMENT}/test_probe.py": textwrap.dedent(SUITE),
        },
    )
    result = run_assignment(root, ASSIGNMENT, root / "solutions", suites=("public",))
    assert result.error is None, result.error
    return {t.name.removeprefix("public/"): t for t in result.tests}, result


def test_missing_function_is_an_error_naming_it(results):
    t = results[0]["test_missing"]
    assert t.outcome == "error" and t.score == 0
    assert "no_such_function" in t.feedback


def test_value_error_maps_to_the_builtin(results):
    t = results[0]["test_value_error_mapped"]
    assert t.outcome == "passed" and t.score == 1


def test_non_plain_return_is_an_error(results):
    t = results[0]["test_not_plain"]
    assert t.outcome == "error" and t.score == 0
    assert "plain data" in t.feedback and "returns_object" in t.feedback


def test_parametrized_points_split_evenly(results):
    cases = [t for name, t in results[0].items() if name.startswith("test_split[")]
    assert len(cases) == 3
    assert all(t.outcome == "passed" and t.score == pytest.approx(1.0) for t in cases)
    assert sum(t.max_score for t in cases) == pytest.approx(3.0)


def test_failed_assert_carries_its_message(results):
    t = results[0]["test_wrong"]
    assert t.outcome == "failed" and t.score == 0 and t.max_score == 2
    assert t.feedback.startswith("add_one(1) returned 2; this test wants 3")


def test_student_assertion_error_cannot_satisfy_a_test(results):
    t = results[0]["test_student_assertion_is_not_expected"]
    assert t.outcome == "error" and t.score == 0
    assert "AssertionError" in t.feedback


def test_gpu_tests_skip_with_a_reason_on_cpu(results):
    t = results[0]["test_gpu_only"]
    if device.has_gpu():
        assert t.outcome == "passed"
    else:
        assert t.outcome == "skipped" and t.score == 0 and t.max_score == 1
        assert "GPU" in t.feedback


def test_student_exception_named_like_a_grader_error_stays_the_students(results):
    t = results[0]["test_grader_named_exception"]
    assert t.outcome == "error" and t.score == 0  # not "timeout": only the grader decides that
    assert "raises_grader_named raised WorkerTimeout" in t.feedback


def test_only_the_trusted_side_makes_infrastructure_outcomes():
    from grader.suites.student import StudentError, WorkerCrashed, WorkerTimeout, make_error

    forged = make_error({"type": "WorkerTimeout", "message": "x", "traceback": ""}, "f")
    assert type(forged) is StudentError and not forged.grader
    real = make_error({"type": "WorkerTimeout", "message": "x", "origin": "grader"}, "f")
    assert isinstance(real, WorkerTimeout) and real.grader
    # the trusted side's own verdicts are never a builtin a test may expect
    assert not isinstance(make_error({"type": "ValueError", "origin": "grader"}), ValueError)
    crashed = make_error({"type": "WorkerCrashed", "message": "m", "origin": "grader"})
    assert isinstance(crashed, WorkerCrashed) and crashed.feedback() == "m"


def test_totals(results):
    tests, result = results
    assert result.max_score == pytest.approx(sum(t.max_score for t in tests.values()))
    assert result.max_score == pytest.approx(11.0)
