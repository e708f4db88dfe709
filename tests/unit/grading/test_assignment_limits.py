"""[assignments.limits]: an assignment's own time and memory limits, graded by workers of its own
(grader.core.course.Course.limits_for, grader.grading.grade)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from factories import course_tree

from grader.core.course import load_course
from grader.core.results import AssignmentResult, Environment, GradeResult
from grader.grading.grade import grade_submission, merge_results
from grader.release.scaffold import _with_entry

ENTRY = """[[assignments]]
id = "{id}"
title = "{id}"
notebook = "{id}.ipynb"
due = "2027-01-01T00:00:00+00:00"
points = 1
needs_gpu = false
{limits}"""

NOTEBOOK = """# %%
import time

# %% nbgrader={"grade": false, "grade_id": "nap", "locked": false, "schema_version": 3, "solution": true, "task": false}
def nap(seconds):
    time.sleep(seconds)
    return seconds
"""  # noqa: E501

TEST = """import pytest


@pytest.mark.points(1)
def test_nap(student):
    assert student.nap(3) == 3
"""


def _course(tmp_path, patient_limits: str):
    root = course_tree(tmp_path / "course")
    text = (root / "course.toml").read_text()
    for a, limits in (("quick", ""), ("patient", patient_limits)):
        text = _with_entry(text, ENTRY.format(id=a, limits=limits))
        (root / "tests" / "public" / a).mkdir(parents=True)
        (root / "tests" / "public" / a / f"test_{a}.py").write_text(TEST)
        (root / "sub" / "exercises" / a).mkdir(parents=True)
        (root / "sub" / "exercises" / a / f"{a}.py").write_text(NOTEBOOK)
    (root / "course.toml").write_text(text)
    return root


def test_limits_for_and_the_groups_graded_together(tmp_path):
    root = _course(tmp_path, "[assignments.limits]\ncall_timeout_s = 1\nmemory_mb = 3000\n")
    course = load_course(root)
    own = course.limits_for("patient")
    assert (own.call_timeout_s, own.memory_mb) == (1.0, 3000)
    base = course.limits
    assert replace(own, call_timeout_s=base.call_timeout_s, memory_mb=base.memory_mb) == base
    assert course.limits_for("quick") == course.limits
    groups = course.limit_groups(["quick", "patient", *course.assignment_ids[:1]])
    assert [ids for _, ids in groups] == [["quick", course.assignment_ids[0]], ["patient"]]
    assert course.submission_seconds(["quick", "patient"]) == 2 * course.limits.submission_timeout_s
    assert course.limit_source("patient", "memory_mb") == (
        "[assignments.limits] memory_mb of 'patient' in course.toml"
    )
    assert course.limit_source("quick", "memory_mb") == "[limits] memory_mb in course.toml"


def test_merged_results_keep_the_course_order_and_each_warning_once():
    env = Environment("cpu", True)

    def part(a: str, score: float, warnings: list[str]) -> GradeResult:
        result = AssignmentResult(a, score, 2)
        return GradeResult("s", score, 2, env, [result], warnings, None, "d", 1.5)

    merged = merge_results([part("b", 2, ["x", "y"]), part("a", 0.5, ["y"])], ["a", "b"])
    assert [r.id for r in merged.assignments] == ["a", "b"]
    assert (merged.score, merged.max_score, merged.warnings) == (2.5, 4, ["x", "y"])
    assert merged.duration_s == 3.0 and merged.submission_digest == "d"


@pytest.mark.slow
def test_an_assignment_is_graded_under_its_own_limits(tmp_path):
    """`patient` allows a call 1 s, the course 20 s: the same 3 s call passes in `quick` and
    times out in `patient`, whose feedback names its own table; grading them together or
    apart gives each the same grade."""
    root = _course(tmp_path, "[assignments.limits]\ncall_timeout_s = 1\n")
    course = load_course(root)
    both = grade_submission(
        root / "sub",
        assignments=["quick", "patient"],
        course=course,
        allow_incomplete_isolation=True,
    )
    quick, patient = both.assignments
    assert (quick.id, quick.score) == ("quick", 1) and (patient.id, patient.score) == ("patient", 0)
    [nap] = patient.tests
    assert nap.outcome == "timeout", nap
    assert "[assignments.limits] call_timeout_s of 'patient' in course.toml" in nap.feedback
    alone = grade_submission(
        root / "sub", assignments=["patient"], course=course, allow_incomplete_isolation=True
    )
    assert [(r.id, r.score) for r in alone.assignments] == [("patient", 0)]
