"""`grader profile`: how each kernel of a notebook meets the memory hierarchy, without a GPU.

For students and instructors. The notebook is chosen by the rule grading uses (`intake.pair`);
each kernel is launched at the course's profiling shapes (``tests/public/<id>/profiles.py``:
`launches(rng)`, the same shapes the hidden tests profile), compiled for the course GPU first
where this machine has the compiler, then run once in the simulator with its memory accesses
recorded (`grader.suites.memory`). Like `grader check` it runs the student's own code on their
own machine (child processes under grading's time limits), so nothing here is authoritative;
the figures are the memory model's (`grader.simt.memmodel`), the same as grading's. Nothing here
prints: `grader.reports.memory` lays the result out.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from grader.core import compiler
from grader.core.course import Course, load_course
from grader.core.cubin import KernelResources
from grader.core.errors import UsageError
from grader.grading.intake import pair, release_for
from grader.simt.memmodel import LaunchProfile
from grader.suites.launches import signature
from grader.suites.memory import described, resources
from grader.suites.student import InProcessBackend, Student, StudentError

PROFILES = "profiles.py"  # in tests/public/<id>/: the course's profiling shapes
SEED = 20261206  # the values in the profiled arrays (the shapes are what matters)
GUIDE = 'docs/ADDING_AN_ASSIGNMENT.md, section 3, "Profiling shapes"'
# An assignment that teaches no occupancy() (gpu_fundamentals does): the occupancy is not shown
NO_OCCUPANCY = (
    "occupancy not shown: this notebook defines no occupancy(threads_per_block, "
    "registers_per_thread, shared_bytes, sm), which `grader profile` asks for it"
)


def no_shapes(assignment: str) -> str:
    """What `grader profile` and `grader check` say of an assignment without profiling shapes."""
    return (
        f"{assignment} has no profiling shapes (tests/public/{assignment}/{PROFILES}), so none "
        f"of its kernels is profiled; its instructor adds them ({GUIDE})"
    )


@dataclass(frozen=True)
class KernelProfile:
    """One profiled launch: its profile, or why there is none (the kernel's own error); with
    `grader profile`, what the compiled kernel holds and the occupancy the student's own
    `occupancy()` gives for it on the course GPU (each, or why not)."""

    kernel: str
    label: str
    launch: str
    brief: bool
    profile: LaunchProfile | None = None
    error: str | None = None
    resources: KernelResources | None = None
    occupancy: dict | None = None
    launch_note: str = ""  # why `resources` or `occupancy` is missing


@dataclass(frozen=True)
class Profiled:
    """An assignment's profiled launches, the notebook they came from and the notes to say once
    (the PTX check deferred where this machine has no CUDA compiler)."""

    assignment: str
    notebook: str
    kernels: list[KernelProfile]
    notes: list[str]


def shapes(root: Path, assignment: str) -> list[dict]:
    """The course's profiling launches of `assignment` ([] when it has no profiles.py)."""
    path = root / "tests" / "public" / assignment / PROFILES
    if not path.is_file():
        return []
    spec = importlib.util.spec_from_file_location(f"grader_profiles_{assignment}", path)
    if spec is None or spec.loader is None:
        raise UsageError(f"{path} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.launches(np.random.default_rng(SEED)))


def profile_kernels(
    student: Student,
    launches: Sequence[dict],
    kernels: Sequence[str] = (),
    brief: bool = False,
    sm: dict[str, int] | None = None,
) -> list[KernelProfile]:
    """Each launch of `launches` (only `kernels`', only the brief ones if `brief`) profiled;
    with `sm` (the course GPU's per-SM limits), its launch statistics too (`launch_stats`)."""
    found = []
    for spec in launches:
        if (kernels and spec["kernel"] not in kernels) or (brief and not spec.get("brief")):
            continue
        name, grid, block = spec["kernel"], spec["grid"], spec["block"]
        args = [a.copy() if isinstance(a, np.ndarray) else a for a in spec["args"]]
        common: dict[str, Any] = {
            "kernel": name,
            "label": spec.get("label", ""),
            "launch": described(grid, block, args),
            "brief": bool(spec.get("brief")),
        }
        try:
            profiled = getattr(student, name)[grid, block].profile(*args)
        except StudentError as exc:
            found.append(KernelProfile(**common, error=exc.feedback()))
            continue
        stats = launch_stats(student, name, block, args, sm) if sm is not None else {}
        found.append(KernelProfile(**common, profile=profiled.memory, **stats))
    return found


def launch_stats(
    student: Student, name: str, block: Any, args: list, sm: dict[str, int]
) -> dict[str, Any]:
    """The compiled kernel's resources, and the occupancy they allow on the course GPU by the
    student's own `occupancy(threads_per_block, registers_per_thread, shared_bytes, sm)` (the
    grader keeps no copy of the rules it asks students to write), or why either is missing."""
    try:
        found = resources(getattr(student, name), signature(args, name))
    except StudentError as exc:
        return {"launch_note": f"not compiled: {exc.feedback().splitlines()[0]}"}
    if isinstance(found, str):
        return {"launch_note": found}
    threads = math.prod(block if isinstance(block, tuple) else (block,))
    if not student.has("occupancy"):
        return {"resources": found, "launch_note": NO_OCCUPANCY}
    try:
        occ = student.occupancy(threads, found.registers, found.shared_bytes, sm)
    except StudentError as exc:
        first = exc.feedback().splitlines()[0] if exc.feedback() else exc.exc_type
        return {"resources": found, "launch_note": f"your occupancy() did not answer: {first}"}
    if not (isinstance(occ, dict) and {"blocks_per_sm", "occupancy", "limited_by"} <= set(occ)):
        return {"resources": found, "launch_note": "your occupancy() did not return its dict"}
    return {"resources": found, "occupancy": occ}


def profile(
    root: Path,
    assignment: str,
    kernels: Sequence[str] = (),
    submission: Path | None = None,
    course: Course | None = None,
) -> Profiled:
    """Profile the kernels of `assignment` (default: every one the course profiles) in the
    student's notebook under `submission` (default: the course's exercises/)."""
    course = course or load_course(root)
    course.assignment(assignment)
    launches = shapes(root, assignment)
    if not launches:
        raise UsageError(no_shapes(assignment))
    known = {spec["kernel"] for spec in launches}
    unknown = [k for k in kernels if k not in known]
    if unknown:
        raise UsageError(
            f"{assignment} profiles no kernel named {', '.join(unknown)}; it profiles "
            f"{', '.join(sorted(known)) or 'none'} (tests/public/{assignment}/{PROFILES})"
        )
    submission = submission.resolve() if submission else root / "exercises"
    chosen = pair(submission, assignment, release_for(submission, root / "exercises"))
    if chosen.path is None:
        raise UsageError(chosen.error or f"no notebook of {assignment} under {submission}")
    backend = InProcessBackend({assignment: chosen.path}, children=True, limits=course.limits)
    try:
        student = Student(
            backend,
            assignment,
            call_timeout=course.limits.call_timeout_s,
            kernel_timeout=course.limits.kernel_timeout_s,
            cc=course.gpu.compute_capability,
        )
        found = profile_kernels(student, launches, kernels, sm=course.gpu.sm.as_dict())
    finally:
        backend.close()
    notes = [compiler.DEFERRED] if backend.compiler_missing else []
    if notes:  # said once, as the profile's note: not again as each launch's missing figures
        found = [replace(k, launch_note="") if compiler.DEFERRED in k.launch_note else k
                 for k in found]  # fmt: skip
    return Profiled(assignment, shown_path(chosen.path, root), found, notes)


def shown_path(path: Path, root: Path) -> str:
    """The file profiled or checked, as the student names it: relative to the course's root when
    it lies inside it (`exercises/m9_roofline/m9_roofline.py`, `solutions/...` with
    `--submission solutions`), else as given."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)
