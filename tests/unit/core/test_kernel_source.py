"""Graded kernels taken from the source: what is extracted, what is refused, and the facade path
(compiled for the course GPU first, then launched from the extracted source, 2-D included)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from factories import ROOT

from grader.core.kernel_source import KernelSourceError, extract, launches, signature
from grader.core.notebook import graded_source, read_notebook
from grader.suites.student import InProcessBackend, KernelRefused, Student

HEADER = "import math\nimport numba\nimport numpy as np\nfrom numba import cuda\n"

TILED = (
    HEADER
    + """
TILE = 16
PAD = TILE + 1
UNUSED = open("/etc/passwd")  # never read by the kernel, so never evaluated by the grader


@cuda.jit(device=True)
def load(src, y, x):
    return src[y, x]


@cuda.jit
def transpose_tiled(src, dst):
    tile = cuda.shared.array((TILE, PAD), numba.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x = cuda.blockIdx.x * TILE + tx
    y = cuda.blockIdx.y * TILE + ty
    if y < src.shape[0] and x < src.shape[1]:
        tile[ty, tx] = load(src, y, x)
    cuda.syncthreads()
    x = cuda.blockIdx.y * TILE + tx
    y = cuda.blockIdx.x * TILE + ty
    if y < dst.shape[0] and x < dst.shape[1]:
        dst[y, x] = tile[tx, ty]


def host(src):
    dst = np.zeros(src.shape[::-1], dtype=src.dtype)
    transpose_tiled[(2, 2), (TILE, TILE)](src, dst)
    return dst
"""
)


def test_extracts_kernel_device_functions_and_constants_only():
    ks = extract(TILED, "transpose_tiled")
    assert ks.device_functions == ("load",)
    assert ks.constants == ("PAD", "TILE")
    assert "PAD = 17" in ks.text and "TILE = 16" in ks.text
    assert "UNUSED" not in ks.text and "def host" not in ks.text and "@" not in ks.text


def test_the_course_kernels_extract(tmp_path):

    root = ROOT
    src = graded_source(read_notebook(root / "solutions/gpu_fundamentals/gpu_fundamentals.py"))
    for name in ("vector_add", "strided_copy"):
        assert f"def {name}(" in extract(src, name).text
    assert launches(src, "gpu_vector_add", "vector_add")
    assert not launches(src, "launch_config", "vector_add")


REFUSED = {
    "an object instead of a def": (
        "class FakeCUDAKernel:\n    pass\n\nk = FakeCUDAKernel()\n",
        "no top-level `def k",
    ),
    "another decorator": (
        "import functools\n\n@functools.cache\ndef k(a):\n    a[0] = 1\n",
        "exactly @cuda.jit",
    ),
    "two decorators": ("@cuda.jit\n@cuda.jit\ndef k(a):\n    a[0] = 1\n", "exactly @cuda.jit"),
    "bound twice": ("@cuda.jit\ndef k(a):\n    a[0] = 1\n\nk = 3\n", "also bound"),
    "a global it may not use": (
        "import os\n\n@cuda.jit\ndef k(a):\n    os.system('x')\n",
        "only cuda, numba, math and numpy",
    ),
    "a builtin numba does not compile": (
        "@cuda.jit\ndef k(a):\n    a[0] = getattr(a, 'x')\n",
        "uses getattr",
    ),
    "a dunder attribute": ("@cuda.jit\ndef k(a):\n    a.__class__\n", "'__class__'"),
    "a computed constant": ("N = len('abc')\n\n@cuda.jit\ndef k(a):\n    a[0] = N\n", "constant N"),
    "a plain helper": (
        "def h(x):\n    return x\n\n@cuda.jit\ndef k(a):\n    a[0] = h(1)\n",
        "device=True",
    ),
    "a default argument": ("@cuda.jit\ndef k(a, n=3):\n    a[0] = n\n", "default"),
    "a class inside": ("@cuda.jit\ndef k(a):\n    class C:\n        pass\n", "inside its body"),
    "a decorated nested function": (
        "@cuda.jit\ndef k(a):\n    @cuda.jit\n    def f():\n        pass\n",
        "with a decorator",
    ),
    "a nested default": ("@cuda.jit\ndef k(a):\n    f = lambda x=open: x\n", "default values"),
    "a builtin read inside a nested function": (
        "@cuda.jit\ndef k(a):\n    def f(x):\n        return open(x)\n    a[0] = f(1)\n",
        "uses open (line 8 of",
    ),
    "a name bound only in a nested scope": (
        "@cuda.jit\ndef k(a):\n    def f(open):\n        return open\n    a[0] = open\n",
        "uses open",
    ),
    "a builtin Numba does not compile for a GPU": (
        "@cuda.jit\ndef k(a):\n    a[0] = sum((1, 2))\n",
        "uses sum",
    ),
    "a constant bound with different values": (
        "TILE = 32\n\nTILE = 16\n\n@cuda.jit\ndef k(a):\n    a[0] = TILE\n",
        "TILE is bound 2 times, at line 5 of the notebook and line 7 of the notebook, with "
        "different values (16 and 32)",
    ),
    "a constant bound as a float and as an int": (
        "TILE = 32\nTILE = 32.0\n\n@cuda.jit\ndef k(a):\n    a[0] = TILE\n",
        "different values (32 and 32.0)",
    ),
    "a constant also bound by a loop": (
        "N = 4\nfor N in range(3):\n    pass\n\n@cuda.jit\ndef k(a):\n    a[0] = N\n",
        "N is bound 2 times in the notebook, at line 5 of the notebook and line 6 of the notebook"
        "; a constant a kernel reads is bound only by top-level assignments of a number or a "
        "tuple of numbers (not at line 6 of the notebook)",
    ),
    "a constant unpacked from too short a tuple": (
        "A, B = (1,), 2\nP, Q = A\n\n@cuda.jit\ndef k(a):\n    a[0] = Q\n",
        "constant Q (line 6 of the notebook) is unpacked",
    ),
    "a list constant": ("L = [1, 2]\n\n@cuda.jit\ndef k(a):\n    a[0] = L[0]\n", "constant L"),
    "a kernel defined twice, differently": (
        "@cuda.jit\ndef k(a):\n    a[0] = 1\n\n@cuda.jit\ndef k(a):\n    a[0] = 2\n",
        "also bound at line 6 of the notebook",
    ),
    "recursion": (
        "@cuda.jit(device=True)\ndef d(x):\n    return d(x)\n\n@cuda.jit\n"
        "def k(a):\n    a[0] = d(1)\n",
        "recursively",
    ),
    "a global statement": (
        "@cuda.jit\ndef k(a):\n    a[0] = 1\n\ndef g():\n    global k\n",
        "also bound",
    ),
}


@pytest.mark.parametrize("source,message", REFUSED.values(), ids=REFUSED.keys())
def test_anything_but_a_plain_kernel_is_refused(source, message):
    with pytest.raises(KernelSourceError, match=re.escape(message)):
        extract(HEADER + source, "k")


def test_refusal_is_not_a_value_error():
    assert not issubclass(KernelSourceError, (ValueError, TypeError))


def test_signature_follows_the_arguments():
    args = [np.zeros((2, 3), np.float32), np.zeros(4, np.float64), 3, 2.0, np.int32(1)]
    assert signature(args) == "void(float32[:, :], float64[:], int64, float64, int32)"
    with pytest.raises(KernelSourceError):
        signature([object()])


def _student(tmp_path, source: str) -> Student:
    nb = tmp_path / "k.py"
    nb.write_text("# %%\n" + source)
    return Student(InProcessBackend({"k": nb}), "k", kernel_timeout=120)


def test_2d_tiled_kernel_compiles_for_the_gpu_then_launches(tmp_path):
    student = _student(tmp_path, TILED)
    assert ".entry" in student.transpose_tiled.ptx("void(float32[:, :], float32[:, :])")
    rng = np.random.default_rng(1)
    src = rng.standard_normal((20, 24)).astype(np.float32)  # not a multiple of the tile
    dst = np.full((24, 20), np.nan, dtype=np.float32)
    student.transpose_tiled[(2, 2), (16, 16)](src, dst)
    np.testing.assert_array_equal(dst, src.T)


def test_a_kernel_that_does_not_compile_for_the_gpu_never_runs(tmp_path):
    student = _student(
        tmp_path,
        HEADER
        + """
@cuda.jit
def k(a):
    d = {}
    d[0] = 1.0
    a[0] = d[0]
""",
    )
    a = np.zeros(4, np.float32)
    with pytest.raises(KernelRefused, match="does not compile for the course GPU"):
        student.k[1, 4](a)
    assert not a.any()


def test_an_impersonating_object_is_refused(tmp_path):
    student = _student(
        tmp_path,
        HEADER
        + """
class FakeCUDAKernel:
    __module__ = "numba.cuda.simulator.kernel"

    def __getitem__(self, dims):
        return lambda a: a.fill(1)


k = FakeCUDAKernel()
""",
    )
    a = np.zeros(4, np.float32)
    with pytest.raises(KernelRefused, match="no top-level"):
        student.k[1, 4](a)
    assert not a.any()


def test_timing_is_the_trusted_clock_and_checks_the_timed_outputs(tmp_path):
    student = _student(
        tmp_path,
        HEADER
        + """
@cuda.jit
def add(a, b, c):
    i = cuda.grid(1)
    if i < c.size:
        c[i] = a[i] + b[i]


@cuda.jit
def accumulate(a, b, c):
    i = cuda.grid(1)
    if i < c.size:
        c[i] += a[i] + b[i]
""",
    )
    a = np.ones(32, np.float32)
    ms = student.add[1, 32].time(a, a, np.zeros_like(a), outputs=(2,))
    assert isinstance(ms, float) and 0 < ms < 250
    # A kernel whose result depends on what its output held (NaN before every timed sample)
    # cannot pass for the one that was timed.
    with pytest.raises(KernelRefused, match="same result as a single launch"):
        student.accumulate[1, 32].time(a, a, np.zeros_like(a), outputs=(2,))


STYLES = """
TILE = 32
TILE = 32  # the same value again (a cell run twice): one constant
ROWS_PER_PASS, PASSES = 4, TILE // 4
(P, Q), R = (1, 2), 3
A = B = 8
C: int = 2
UNUSED, OTHER = 1, open("/etc/passwd")  # the tuple's other element is never evaluated


@cuda.jit(device=True)
def twice(x):
    return 2 * x


@cuda.jit(device=True)
def twice(x):
    return 2 * x


@cuda.jit
def k(a, out):
    i = cuda.grid(1)
    if i >= out.size:
        raise ValueError("never")
    r, c = divmod(i, TILE)
    sq = lambda v: v * v

    def cube(v):
        return v * sq(v)

    s = 0
    for j, (x, y) in enumerate(zip(range(PASSES), range(ROWS_PER_PASS))):
        s += x * y + j
    out[i] = (
        pow(r, 2) + min(c, P) + max(Q, R) + abs(-A) + round(1.5) + int(2.0) + float(B)
        + bool(C) + len(a) + s + cube(UNUSED) + twice(1)
    )
"""


def test_what_numba_compiles_is_extracted_compiles_and_runs(tmp_path):
    """Builtins Numba compiles in device code, constants bound by tuple, chained and annotated
    assignment or bound again with the same value, functions and lambdas inside a kernel, a
    device function defined twice the same way: extracted, compiled for the GPU, launched."""
    ks = extract(HEADER + STYLES, "k")
    assert ks.device_functions == ("twice",)
    assert set(ks.constants) == {
        "A",
        "B",
        "C",
        "P",
        "PASSES",
        "Q",
        "R",
        "ROWS_PER_PASS",
        "TILE",
    } | {"UNUSED"}
    for line in ("TILE = 32", "PASSES = 8", "ROWS_PER_PASS = 4", "Q = 2", "A = 8", "C = 2"):
        assert line in ks.text.splitlines()
    assert "open" not in ks.text and "OTHER" not in ks.text
    student = _student(tmp_path, HEADER + STYLES)
    assert ".entry" in student.k.ptx("void(float32[:], float32[:])")
    a, out = np.zeros(32, np.float32), np.zeros(64, np.float32)
    student.k[2, 32](a, out)
    # thread 0: 0 + 0 + 3 + 8 + 2 + 2 + 8 + 1 + 32 + (0 + 2 + 6 + 12) + 1 + 2; thread 33 adds
    # pow(1, 2) and min(1, 1)
    assert out[0] == 79 and out[33] == 81
