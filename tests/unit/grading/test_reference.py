"""The reference record is what course.toml's [metrics] names, computed from the solution."""

from __future__ import annotations

import dataclasses
import shutil

import pytest
from factories import ROOT

from grader.core.course import CourseError
from grader.grading.reference import compute_reference_record, reference_record
from grader.sandbox.harness import load_module


def test_the_reference_record_is_the_solutions_own(course):
    solution = load_module(ROOT / "solutions" / "m9_roofline" / "m9_roofline.py", "ref_test_m9")
    gpu = course.gpu
    expected = solution.m9_record(
        solution.COURSE_MODEL,
        gpu.as_gpu_dict(),
        solution.CONTEXT_LEN,
    )
    assert compute_reference_record(course) == expected


def test_a_name_the_solution_lacks_is_a_course_error(course):
    spec = dataclasses.replace(course.metrics, arguments=("COURSE_MODLE",))
    broken = dataclasses.replace(course, metrics=spec)
    with pytest.raises(CourseError, match="course.toml \\[metrics\\].*'COURSE_MODLE'"):
        compute_reference_record(broken)
    assert reference_record(broken) is None  # a report is drawn without it


def test_no_record_without_metrics_or_solutions(course, tmp_path):
    assert reference_record(dataclasses.replace(course, metrics=None)) is None
    shutil.copy(ROOT / "course.toml", tmp_path)  # a student's clone: no solutions/
    assert reference_record(dataclasses.replace(course, root=tmp_path)) is None
