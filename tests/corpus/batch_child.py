"""The corpus batch's `grade_one`, in a module of its own so that each child imports
only the grader: not build.py and its cases (matplotlib through grader.demo, the load probe),
which cost a child more than a second before its grading starts.

Everything a case needs besides its folder travels in the partial (`build.batch_grade_one`):
its assignments, its trusted-process environment, its own limits (already scaled by the
parent's SCALE, so a child under load does not scale them again), and the parent's isolation
probe, adopted as `grader.batch.entry.grade_entry` adopts the batch's.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any


def grade_one(
    submission: Path,
    student: str,
    work_dir: Path,
    root: str,
    assignments: dict[str, list[str]],
    envs: dict[str, dict[str, str]],
    limits: dict[str, dict[str, Any]],
    probe: Any = None,
) -> Any:
    """Grade one corpus case on its own assignments, as when it is graded alone."""
    from grader.core.course import load_course
    from grader.grading.grade import grade_submission
    from grader.sandbox.isolation import adopt

    if probe is not None:
        adopt(probe)
    os.environ.update(envs.get(student, {}))
    course = with_limits(load_course(Path(root)), limits.get(student, {}))
    return grade_submission(
        Path(submission), student=student, assignments=assignments[student], course=course
    )


def with_limits(course: Any, limits: dict[str, Any]) -> Any:
    """The course with these limits (already scaled) in place of its own; itself without any."""
    if not limits:
        return course
    return dataclasses.replace(course, limits=dataclasses.replace(course.limits, **limits))
