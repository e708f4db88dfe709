"""Item sizes as Numba compiles them: `memmodel.access_unit` against the SASS.

The model records each element access as the load and store instructions Numba compiles for it
(`grader.simt.memtrace`). Here one kernel copies an element of each type (``out[i] = x[i]`` for
int8, float16, float32, float64, complex64 and complex128), compiled for the T4 (sm_75), linked
to a cubin and disassembled (`grader.core.cubin`); its global loads and stores, sized by their
opcode, must be the model's: a complex128 two ``LDG.E.64``, a complex64 two 32-bit loads, the
rest one load of the element's size. (A record, copied byte by byte in the SASS, is refused by
the recorder: docs/MEMORY_MODEL.md, P20.) Skipped, with the reason, where nvJitLink or nvdisasm
is not installed.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest

from grader.core import cubin
from grader.simt import memmodel
from grader.suites.student import InProcessBackend, Student

MISSING = cubin.available()
pytestmark = pytest.mark.skipif(MISSING is not None, reason=f"cubin tools: {MISSING}")
TYPES = ("int8", "float16", "float32", "float64", "complex64", "complex128")
SOURCE = """# %%
from numba import cuda


@cuda.jit
def copies(a0, b0, a1, b1, a2, b2, a3, b3, a4, b4, a5, b5):
    i = cuda.grid(1)
    b0[i] = a0[i]
    b1[i] = a1[i]
    b2[i] = a2[i]
    b3[i] = a3[i]
    b4[i] = a4[i]
    b5[i] = a5[i]
"""
WIDTH = {"U8": 1, "S8": 1, "U16": 2, "S16": 2, "": 4, "64": 8, "128": 16}
ACCESS = re.compile(r"\b(LDG|STG)\.E(?:\.(U8|S8|U16|S16|64|128))?\b")


def test_the_model_splits_each_element_as_the_sass_does(tmp_path):
    nb = tmp_path / "items.py"
    nb.write_text(SOURCE, encoding="utf-8")
    student = Student(InProcessBackend({"items": nb}), "items", kernel_timeout=300)
    signature = "void(" + ", ".join(f"{t}[::1], {t}[::1]" for t in TYPES) + ")"
    sass = cubin.sass(cubin.link(student.copies.ptx(signature, cc=(7, 5)), (7, 5)))
    found: dict[str, Counter] = {"LDG": Counter(), "STG": Counter()}
    for op, width in ACCESS.findall(sass):
        found[op][WIDTH[width]] += 1
    expected: Counter = Counter()
    for name in TYPES:
        dtype = np.dtype(name)
        unit = memmodel.access_unit(dtype.itemsize, dtype.kind, bool(dtype.fields))
        expected[unit] += dtype.itemsize // unit
    # bytes -> instructions: 1: 1, 2: 1, 4: 3 (float32, complex64's halves), 8: 3 (float64,
    # complex128's halves); a complex as one wide access would show as 8- and 16-byte ones
    assert expected == Counter({1: 1, 2: 1, 4: 3, 8: 3})
    assert found == {"LDG": expected, "STG": expected}, found
