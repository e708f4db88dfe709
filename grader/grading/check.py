"""`grader check`: the public suites against a student's own exercises, in this process.

What a student runs before pushing. The notebook of each assignment is chosen by the rule grading
uses (`intake.pair`), the suites are the public ones, and there is no sandbox: the code is the
student's own, on their own machine. It still runs in child processes under grading's per-call
time limits (an infinite loop costs its test, with grading's message), and without a CUDA
compiler the PTX check is deferred to grading (`grader.core.compiler`). Nothing here prints;
`reports.terminal` lays the outcome out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from grader.core import compiler
from grader.core.course import Course, load_course
from grader.core.results import AssignmentResult
from grader.grading.grade import GradingBackend
from grader.grading.intake import pair, release_for
from grader.grading.profile import KernelProfile, no_shapes, profile_kernels, shapes, shown_path
from grader.suites.runner import run_assignment
from grader.suites.student import InProcessBackend, Student


@dataclass
class Checked:
    """One assignment checked: its result, the notebook chosen as the student names it
    (`exercises/<id>/<id>.py`, or "nothing"), the intake's warnings and the cells that failed
    to run (as grading words them), and the check's notes
    (the PTX check deferred to grading where this machine has no CUDA compiler, or that it ran
    here and whether every kernel passed)."""

    result: AssignmentResult
    notebook: str
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # neither pass nor failure, said once
    # one profiled launch per kernel the course profiles (`grader profile` has them all)
    memory: list[KernelProfile] = field(default_factory=list)


def check(
    root: Path, assignment_ids: Sequence[str] = (), submission: Path | None = None
) -> list[Checked]:
    """Run the public suites of `assignment_ids` (default: all) against `submission`
    (default: the course's exercises/). An unknown id raises the course's error first."""
    course = load_course(root)
    ids = list(assignment_ids) or course.assignment_ids
    for a in ids:
        course.assignment(a)
    submission = submission.resolve() if submission else root / "exercises"
    release = release_for(submission, root / "exercises")
    chosen = {a: pair(submission, a, release) for a in ids}
    notebooks = {a: c.path for a, c in chosen.items() if c.path is not None}
    errors = {a: c.error or "no notebook" for a, c in chosen.items() if c.path is None}
    limits = {a: course.limits_for(a) for a in ids}
    inner = InProcessBackend(notebooks, children=True, limits=limits)
    backend = GradingBackend(inner, errors)
    checked = []
    try:
        for a in ids:
            before = (inner.compiled, len(inner.compile_failed))
            r = run_assignment(
                root,
                a,
                submission,
                root / "metrics.json",
                suites=("public",),
                backend=backend,
                course=course,
            )
            if a in errors:
                r.error = errors[a]
            c = chosen[a]
            shown = shown_path(c.path, root) if c.path is not None else "nothing"
            warnings, notes = list(c.warnings), compile_notes(inner, course, before)
            memory: list[KernelProfile] = []
            if c.path is not None:
                warnings += backend.cell_warnings(a, limits[a].call_timeout_s)
                memory, said = _memory(root, a, course, inner, backend)
                notes += said
            checked.append(Checked(r, shown, warnings, notes, memory))
    finally:
        backend.close()
    return checked


def _memory(
    root: Path, a: str, course: Course, inner: InProcessBackend, backend: GradingBackend
) -> tuple[list[KernelProfile], list[str]]:
    """The brief profile of `a`'s kernels, and the note when it has kernels but no profiling
    shapes (the instructor's to add; `grader profile` says the same)."""
    launches = shapes(root, a)
    if not launches:
        kernels = "cuda.jit" in backend.graded_source(a)
        return [], [no_shapes(a)] if kernels else []
    student = Student(
        inner,
        a,
        call_timeout=course.limits.call_timeout_s,
        kernel_timeout=course.limits.kernel_timeout_s,
        cc=course.gpu.compute_capability,
    )
    return profile_kernels(student, launches, brief=True), []


def compile_notes(inner: InProcessBackend, course: Course, before: tuple[int, int]) -> list[str]:
    """The PTX check's note for the assignment just checked: deferred (no compiler here), or that
    it ran and how it went; nothing when the assignment compiled no kernel. `before` is the
    backend's (compilations, failures) before the assignment ran."""
    if inner.compiler_missing:
        return [compiler.DEFERRED]
    compiled = inner.compiled - before[0]
    if compiled:
        failed = inner.compile_failed[before[1] :]
        return [compiler.ran_note(compiled, failed, course.gpu.compute_capability)]
    return []


def all_passed(checked: Sequence[Checked]) -> bool:
    return all(c.result.score == c.result.max_score for c in checked)
