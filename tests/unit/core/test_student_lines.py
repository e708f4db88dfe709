"""Feedback on day one: an untouched stub says so and nothing else, and every line number in a
kernel or wrapper message is the student's own (.py line, or .ipynb cell and line)."""

from __future__ import annotations

from pathlib import Path

import jupytext
import numpy as np
import pytest
from factories import ROOT

from grader.core.stubs import still_stub
from grader.suites.student import InProcessBackend, KernelRefused, Student, StudentError

AID = "gpu_fundamentals"
BAD = "c[i] = a[i] + b[i] + not_a_kernel_name"


def _student(path: Path) -> tuple[Student, InProcessBackend]:
    backend = InProcessBackend({AID: path})
    return Student(backend, AID, kernel_timeout=120), backend


def _args(n: int = 40):
    a = np.arange(n, dtype=np.float32)
    return a, np.ones_like(a), np.zeros_like(a)


def test_untouched_stubs_say_only_that_they_are_stubs():
    s, backend = _student(ROOT / "exercises" / AID / f"{AID}.py")
    try:
        with pytest.raises(KernelRefused) as kernel:
            s.vector_add[1, 64](*_args())
        assert kernel.value.feedback() == still_stub("vector_add")
        with pytest.raises(KernelRefused) as wrapper:
            s.gpu_vector_add.launching("vector_add")(*_args()[:2], 64)
        assert wrapper.value.feedback() == still_stub("gpu_vector_add")
        with pytest.raises(StudentError) as call:
            s.ridge_point(989e12, 3.35e12)
        assert call.value.feedback() == "ridge_point is still the stub: fill in its body"
    finally:
        backend.close()


def _with_bad_kernel(tmp_path: Path) -> tuple[str, int]:
    text = (ROOT / "solutions" / AID / f"{AID}.py").read_text()
    old = "        c[i] = a[i] + b[i]  # grader: public\n"
    assert text.count(old) == 1
    text = text.replace(old, f"        {BAD}\n")
    line = text.splitlines().index(f"        {BAD}") + 1
    return text, line


def test_a_refused_kernel_names_the_line_of_the_py_file(tmp_path):
    text, line = _with_bad_kernel(tmp_path)
    path = tmp_path / AID / f"{AID}.py"
    path.parent.mkdir()
    path.write_text(text)
    s, backend = _student(path)
    try:
        with pytest.raises(KernelRefused) as exc:
            s.vector_add[1, 64](*_args())
        assert f"not_a_kernel_name (line {line} of {AID}.py)" in exc.value.feedback()
    finally:
        backend.close()


def test_a_refused_kernel_names_the_cell_and_line_of_the_ipynb(tmp_path):
    text, _ = _with_bad_kernel(tmp_path)
    nb = jupytext.reads(text, fmt="py:percent")
    path = tmp_path / AID / f"{AID}.ipynb"
    path.parent.mkdir()
    jupytext.write(nb, path)
    code = [c for c in nb.cells if c.cell_type == "code"]  # Jupyter numbers no cells
    [(cell, row)] = [
        (i + 1, k + 1)
        for i, c in enumerate(code)
        for k, src in enumerate(c.source.split("\n"))
        if src.strip() == BAD
    ]
    s, backend = _student(path)
    try:
        with pytest.raises(KernelRefused) as exc:
            s.vector_add[1, 64](*_args())
        feedback = exc.value.feedback()
        assert f"(code cell {cell} (under " in feedback  # its heading, as the student sees it
        assert f"), line {row} of {AID}.ipynb)" in feedback
    finally:
        backend.close()
