"""The reference solution's M9 record: the point the roofline plot of every report compares with.

Computed by the trusted process from `solutions/m9_roofline/m9_roofline.py` (the instructor's
code, never a student's) for the course model on the course GPU. Reports are drawn with it by
`grader grade --html`, grade-all and the sample class.
"""

from __future__ import annotations

from grader.core.course import Course
from grader.sandbox.harness import load_module


def compute_m9_record(course: Course) -> dict | None:
    """The reference M9 record; None without solutions/. Raises what the solution raises."""
    solution = course.root / "solutions" / "m9_roofline" / "m9_roofline.py"
    if not solution.is_file():  # no solutions/: a student's clone
        return None
    m9 = load_module(solution, "reference_m9_record")
    gpu = course.gpu
    return m9.m9_record(
        m9.COURSE_MODEL,
        {"name": gpu.key, "peak_flops": gpu.peak_flops, "peak_bandwidth": gpu.peak_bandwidth},
        m9.CONTEXT_LEN,
    )


def reference_m9_record(course: Course) -> dict | None:
    """The reference M9 record for a report, or None when it cannot be computed: the roofline
    then shows the student's points alone."""
    try:
        return compute_m9_record(course)
    except Exception:  # a broken reference must not stop a report
        return None
