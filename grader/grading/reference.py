"""The reference solution's metrics record: the point the roofline plot of every report compares
with.

Computed by the trusted process from the solution of course.toml's `[metrics]` assignment (the
instructor's code, never a student's): `function(*arguments)` of
`solutions/<assignment>/<assignment>.py`, each argument a name in that module or the course GPU
(M9's `m9_record(COURSE_MODEL, gpu, CONTEXT_LEN)`, for example). Reports are drawn with it by
`grader grade --html`, grade-all and the sample class.
"""

from __future__ import annotations

from typing import Any

from grader.core.course import COURSE_GPU_ARGUMENT, Course, CourseError
from grader.sandbox.harness import load_module


def compute_reference_record(course: Course) -> dict | None:
    """The reference metrics record; None without `[metrics]` or without solutions/. Raises what
    the solution raises, and `CourseError` when it lacks a name course.toml gives."""
    spec = course.metrics
    if spec is None:
        return None
    solution = course.root / "solutions" / spec.assignment / f"{spec.assignment}.py"
    if not solution.is_file():  # no solutions/: a student's clone
        return None
    module = load_module(solution, f"reference_record_{spec.assignment}")
    course_gpu = course.gpu.as_gpu_dict()

    def named(name: str) -> Any:
        if name == COURSE_GPU_ARGUMENT:
            return course_gpu
        if not hasattr(module, name):
            raise CourseError(
                f"course.toml [metrics]: {solution.relative_to(course.root)} defines no {name!r}; "
                "name a function and arguments the solution defines"
            )
        return getattr(module, name)

    return named(spec.function)(*(named(a) for a in spec.arguments))


def reference_record(course: Course) -> dict | None:
    """The reference metrics record for a report, or None when it cannot be computed: the
    roofline then shows the student's points alone."""
    try:
        return compute_reference_record(course)
    except Exception:  # a broken reference must not stop a report
        return None
