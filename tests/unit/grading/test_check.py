"""`grader check` on the student's machine: grading's time limits in child workers, one compile
worker, and the PTX check deferred (never failed) where the CUDA compiler is missing."""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from factories import ROOT

from grader.core import compiler
from grader.core.course import load_course
from grader.core.results import AssignmentResult
from grader.grading.check import Checked, check, compile_notes
from grader.grading.grade import GradingBackend
from grader.reports.terminal import check_report
from grader.sandbox import backend as sandbox_backend
from grader.sandbox import protocol
from grader.suites.inprocess import ChildWorker, InProcessBackend
from grader.suites.student import Student, WorkerTimeout

AID = "gpu_fundamentals"
CALL_S, KERNEL_S = 3, 6


@pytest.fixture
def short_course(tmp_path: Path) -> Path:
    """The course with short per-call limits (suites and reference are the real ones)."""
    root = tmp_path / "course"
    root.mkdir()
    text = (ROOT / "course.toml").read_text()
    text = re.sub(r"(?m)^call_timeout_s = \d+", f"call_timeout_s = {CALL_S}", text)
    text = re.sub(r"(?m)^kernel_timeout_s = \d+", f"kernel_timeout_s = {KERNEL_S}", text)
    (root / "course.toml").write_text(text)
    for name in ("tests", "solutions", "exercises"):
        (root / name).symlink_to(ROOT / name)
    return root


def _submission(tmp_path: Path, *edits: tuple[str, str]) -> Path:
    sub = tmp_path / "submission"
    (sub / AID).mkdir(parents=True)
    text = (ROOT / "solutions" / AID / f"{AID}.py").read_text()
    for old, new in edits:
        assert old in text
        text = text.replace(old, new, 1)
    (sub / AID / f"{AID}.py").write_text(text)
    return sub


def test_an_infinite_loop_costs_its_test_within_the_limit_and_says_so(short_course, tmp_path):
    sub = _submission(
        tmp_path,
        (
            '    flops = _require_positive("peak_flops"',
            '    while True:\n        pass\n    flops = _require_positive("peak_flops"',
        ),
        (
            "    i = cuda.grid(1)  # grader: public\n    if i < c.size:",
            "    i = cuda.grid(1)\n    while i >= 0:\n        i = i + 0\n    if i < c.size:",
        ),
    )
    [c] = check(short_course, [AID], sub)
    tests = {t.name.split("/")[-1]: t for t in c.result.tests}
    ridge = tests["test_ridge_point_h100"]
    assert ridge.outcome == "timeout", ridge
    assert protocol.timeout_message("ridge_point", CALL_S) in ridge.feedback
    add = tests["test_vector_add_small"]
    assert add.outcome == "timeout", add
    assert "took longer than 6 s" in add.feedback
    # the worker restarted: the other functions still pass
    assert tests["test_launch_config_examples"].outcome == "passed"
    assert tests["test_occupancy_examples"].outcome == "passed"


def test_a_hanging_call_returns_within_its_limit_plus_ten_seconds(short_course, tmp_path):
    sub = _submission(
        tmp_path,
        (
            '    flops = _require_positive("peak_flops"',
            '    while True:\n        pass\n    flops = _require_positive("peak_flops"',
        ),
    )
    nb = sub / AID / f"{AID}.py"
    backend = InProcessBackend({AID: nb}, children=True, limits=load_course(short_course).limits)
    try:
        s = Student(backend, AID, call_timeout=CALL_S)
        assert s.has("ridge_point")  # the notebook is loaded: only the call is timed below
        t0 = time.monotonic()
        with pytest.raises(WorkerTimeout, match=f"ridge_point took longer than {CALL_S} s"):
            s.ridge_point(989e12, 3.35e12)
        assert CALL_S <= time.monotonic() - t0 < CALL_S + 10
        assert s.launch_config(1000, 256) == (4, 256)  # a fresh worker answers the next call
        assert backend._notebook_worker.starts == 2
    finally:
        backend.close()


def _simulator_compiler() -> ChildWorker:
    """A compile worker that cannot compile PTX (it runs the simulator), as on a student
    profile without the CUDA toolkit."""
    return ChildWorker(["--kernels"], {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"})


def test_without_a_compiler_kernels_are_graded_and_the_ptx_check_is_deferred():
    nb = ROOT / "solutions" / AID / f"{AID}.py"
    backend = InProcessBackend({AID: nb})
    backend.compiler.close()
    backend.compiler = _simulator_compiler()
    try:
        s = Student(backend, AID, kernel_timeout=120)
        a = np.arange(300, dtype=np.float32)
        b = np.ones(300, dtype=np.float32)
        c = np.zeros_like(a)
        s.vector_add[2, 256](a, b, c)  # graded in the simulator all the same
        np.testing.assert_array_equal(c, a + b)
        assert backend.compiler_missing and "simulator" in backend.compiler_missing
        with pytest.raises(pytest.skip.Exception, match=re.escape(compiler.DEFERRED)):
            s.vector_add.ptx("void(float32[:], float32[:], float32[:])")
        # authoritative grading refuses such a machine instead of grading without the check
        with pytest.raises(compiler.PtxCompilerMissing, match="grading refused"):
            grading = GradingBackend(backend, {})
            grading.check_compiler(60)
            grading.raise_refusal()
    finally:
        backend.close()


def test_with_the_compiler_one_worker_compiles_every_signature():
    nb = ROOT / "solutions" / AID / f"{AID}.py"
    backend = InProcessBackend({AID: nb})
    try:
        s = Student(backend, AID, kernel_timeout=120)
        for dtype in ("float32", "float64", "int32"):
            ptx = s.vector_add.ptx(f"void({dtype}[:], {dtype}[:], {dtype}[:])")
            assert ".entry" in ptx
        assert backend.compiler_missing is None
        assert backend.compiler.starts == 1
    finally:
        backend.close()


def test_the_deferred_note_is_printed_once(tmp_path):
    sub = tmp_path / "sub"
    shutil.copytree(ROOT / "solutions" / "m9_roofline", sub / "m9_roofline")
    [c] = check(ROOT, ["m9_roofline"], sub)
    c.notes = [compiler.DEFERRED]
    text = check_report([c, c], verbose=False)
    assert text.count(compiler.DEFERRED) == 1
    assert "the grader's fault" not in text


KERNEL_NOTEBOOK = """\
# %%
from numba import cuda


@cuda.jit
def add_one(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1.0
"""
KERNEL_SUITE = """\
import numpy as np
import pytest


@pytest.mark.points(1)
def test_add_one(student):
    x = np.zeros(40, dtype=np.float32)
    student.add_one[2, 32](x)
    assert (x == 1.0).all()
"""


def test_a_failed_compile_probe_refuses_the_grading_and_runs_no_graded_kernel(
    tmp_path, monkeypatch
):
    """The probe runs in the warm-up, beside pytest's start, not before it: a failure must still
    refuse the whole grading (nothing returned) and keep every graded kernel from running."""
    from factories import course_tree

    from grader.grading import grade

    root = course_tree(
        tmp_path / "course",
        {
            f"solutions/{AID}/{AID}.py": KERNEL_NOTEBOOK,
            f"tests/hidden/{AID}/test_probe_hidden.py": KERNEL_SUITE,
        },
    )
    sub = course_tree(tmp_path / "sub", {f"exercises/{AID}/{AID}.py": KERNEL_NOTEBOOK}, ())
    graded_kernels = []
    real_kernel = grade.GradingBackend._kernel

    def counted(self, req, timeout, target, key):
        graded_kernels.append(req.get("op"))
        return real_kernel(self, req, timeout, target, key)

    monkeypatch.setattr(grade.GradingBackend, "_kernel", counted)
    monkeypatch.setattr(compiler, "missing_reason", lambda reply: "NVVM missing (the test's)")
    # what the compile worker printed last goes with the refusal, control characters replaced
    printed = "x" * 2000 + "libnvvm.so: cannot open \x1b[31mshared object\n"
    monkeypatch.setattr(sandbox_backend._Worker, "output_tail", lambda self: printed)
    with pytest.raises(compiler.PtxCompilerMissing, match="grading refused") as refused:
        grade.grade_submission(sub, root=root, assignments=[AID], student="s")
    detail = str(refused.value.detail)
    assert "NVVM missing (the test's)" in detail
    assert "last output: " in detail and "libnvvm.so: cannot open ?[31mshared object)" in detail
    assert "x" * (grade.COMPILE_OUTPUT_CHARS - 50) in detail
    assert "x" * grade.COMPILE_OUTPUT_CHARS not in detail
    assert graded_kernels == []
    monkeypatch.setattr(compiler, "missing_reason", lambda reply: None)
    result = grade.grade_submission(sub, root=root, assignments=[AID], student="s")
    assert (result.score, result.max_score) == (1.0, 1.0)
    assert graded_kernels and "kernel_compile" in graded_kernels


def test_the_check_says_when_the_compile_check_ran_and_passed(tmp_path):
    """With the compiler installed, `grader check` says the PTX check ran and passed, instead of
    saying nothing; a kernel that does not compile is named."""
    course = load_course(ROOT)
    backend = InProcessBackend({AID: ROOT / "solutions" / AID / f"{AID}.py"})
    try:
        s = Student(backend, AID, kernel_timeout=120)
        before = (backend.compiled, len(backend.compile_failed))
        s.vector_add.ptx("void(float32[:], float32[:], float32[:])")
        [note] = compile_notes(backend, course, before)
        assert "compute capability 7.5) ran here and passed: 1 kernel" in note, note
        backend.compile_failed.append("strided_copy")  # as a kernel that failed to compile
        backend.compiled += 1
        [note] = compile_notes(backend, course, before)
        assert "1 of 2 kernel compilation(s) passed; strided_copy did not compile" in note
        assert compile_notes(backend, course, (backend.compiled, 1)) == []  # nothing compiled
    finally:
        backend.close()
    note = compiler.ran_note(3, [], (7, 5))
    shown = check_report([Checked(AssignmentResult(AID, 0.0, 0.0), "nothing", [], [note])], False)
    assert f"note: {note}" in shown  # printed under the tables, as the deferred note is


def test_a_scratch_cell_that_fails_is_named_at_no_cost_and_the_file_checked_is_the_one_given(
    tmp_path,
):
    """A scratch cell raising NameError: `grader check` says which cell failed, worded as the
    grading of a pull request words it, and keeps every point (grading would too); the file
    it names is the one it checked, not `exercises/...`."""
    sub = tmp_path / "sub"
    shutil.copytree(ROOT / "solutions" / "m9_roofline", sub / "m9_roofline")
    nb = sub / "m9_roofline" / "m9_roofline.py"
    text = nb.read_text()
    nb.write_text(text + "\n# %%\nprint(undefined_scratch_name)\n")
    [c] = check(ROOT, ["m9_roofline"], sub)
    assert c.notebook == str(nb.resolve())  # outside the course: the path given
    [warning] = [w for w in c.warnings if "undefined_scratch_name" in w]
    line = len(text.splitlines()) + 3
    assert f"m9_roofline.py line {line} (an untagged cell" in warning
    assert "NameError" in warning and "costs nothing by itself" in warning
    shown = check_report([c], verbose=False)
    assert f"warning: {warning}" in shown
    [inside] = check(ROOT, ["m9_roofline"], ROOT / "solutions")
    assert inside.notebook == "solutions/m9_roofline/m9_roofline.py"
    assert not inside.warnings
    assert c.result.score == inside.result.score  # the scratch cell cost nothing
