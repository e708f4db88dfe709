"""Graded kernels taken from the source: what is extracted, what is refused, and the facade path
(compiled for the course GPU first, then launched from the extracted source, 2-D included)."""

from __future__ import annotations

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
    "a nested function": ("@cuda.jit\ndef k(a):\n    def f():\n        pass\n", "inside its body"),
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
    with pytest.raises(KernelSourceError, match=message.replace("(", r"\(")):
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
