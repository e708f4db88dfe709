"""Hidden tests for S5.1's tiled matrix multiply (never shipped to students).

`tiled_intensity` is compared with the reference on drawn tiles and element sizes, with fixed
examples that every seed runs. Both kernels run in the simulator on matrix shapes drawn at
grading time, mostly not multiples of the block or the tile, against NumPy's product, and are
compiled for the course GPU; how the tiled one reuses its loads is graded from the memory model
(test_memory_hidden.py).

Stated rules (grader verify checks that every test here is listed, with a sentence that appears
word for word in the released notebook):

- test_tiled_intensity_random: "the FLOPs per byte of global memory of the tiled multiply above
  with a `tile x tile` tile of elements of `itemsize` bytes, as a Python `float`."
- test_tiled_intensity_invalid: "Both arguments are integers `>= 1`; an integer below 1 raises
  `ValueError`, and a non-integer (`32.0`, `True`) raises `TypeError`."
- test_matmul_naive_shapes: "the grader launches it with several block shapes on sizes that
  are not multiples of the block"
- test_matmul_naive_compiles_to_ptx: "compiles it for the T4 with the signature
  `void(float32[:, :], float32[:, :], float32[:, :])`."
- test_matmul_tiled_shapes: "Write `matmul_tiled(a, b, c)`, same contract as `matmul_naive`
  (any `M`, `N`, `K`, including sizes that are not multiples of `TILE`"
- test_matmul_tiled_compiles_to_ptx: "The grader compiles it for the T4 with the signature
  `void(float32[:, :], float32[:, :], float32[:, :])`, and profiles it"

PYTEST_DONT_REWRITE: pytest leaves these asserts alone, because their messages are what the
student reads as feedback.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from grader.suites.student import StudentError
from grader.suites.testing import expect_value_error, expect_written, launch, unwritten

FAST = settings.get_profile("grader-hidden")  # tests/hidden/conftest.py
TILE = 32
SIG = "void(float32[:, :], float32[:, :], float32[:, :])"
NAIVE_BLOCKS = ((8, 8), (16, 4), (32, 2), (4, 16), (8, 4))
RTOL = 1e-4


@pytest.mark.points(1)
@FAST
@given(
    tile=st.one_of(st.integers(1, 64), st.integers(1, 4096)),
    itemsize=st.sampled_from([1, 2, 4, 8]),
)
@example(tile=1, itemsize=4)  # the naive kernel: 0.25
@example(tile=32, itemsize=4)  # 8
@example(tile=16, itemsize=2)  # 8
@example(tile=3, itemsize=8)  # 0.375
def test_tiled_intensity_random(student, reference, tile, itemsize):
    got = student.tiled_intensity(tile, itemsize=itemsize)
    want = reference.tiled_intensity(tile, itemsize=itemsize)
    assert type(got) is float, f"tiled_intensity must return a Python float, got {got!r}"
    assert got == pytest.approx(want, rel=1e-12), (
        f"tiled_intensity({tile}, itemsize={itemsize}) returned {got!r}; expected {want!r} "
        "FLOP/byte: each step along K loads 2 tile^2 elements and does 2 tile^3 FLOPs"
    )


@pytest.mark.points(1)
def test_tiled_intensity_invalid(student):
    for what, call in (
        ("tiled_intensity(0)", lambda: student.tiled_intensity(0)),
        ("tiled_intensity(-4)", lambda: student.tiled_intensity(-4)),
        ("tiled_intensity(8, itemsize=0)", lambda: student.tiled_intensity(8, itemsize=0)),
    ):
        expect_value_error(call, what, "tile and itemsize must be at least 1")
    for what, args in (("tiled_intensity(32.0)", (32.0,)), ("tiled_intensity(True)", (True,))):
        try:
            result = student.tiled_intensity(*args)
        except TypeError:
            continue
        except StudentError as exc:
            pytest.fail(f"{what} raised {exc.exc_type}; expected TypeError")
        pytest.fail(f"{what} returned {result!r}; expected TypeError (an integer is required)")


def _operands(rng: np.random.Generator, m: int, k: int, n: int):
    a = rng.standard_normal((m, k)).astype(np.float32)  # grader: public
    b = rng.standard_normal((k, n)).astype(np.float32)  # grader: public
    return a, b


def _check_product(student, name: str, a: np.ndarray, b: np.ndarray, grid, block) -> None:
    m, n = a.shape[0], b.shape[1]
    a0, b0 = a.copy(), b.copy()
    c = unwritten((m, n))  # grader: public
    launch(getattr(student, name), grid, block, a, b, c, n=m * n, name=name)  # grader: public
    assert np.array_equal(a, a0) and np.array_equal(b, b0), (
        f"{name} changed its inputs a or b; a kernel must only write c"
    )
    # grader: public
    expect_written(c, name, "c")
    want = a.astype(np.float64) @ b.astype(np.float64)  # grader: public
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)  # grader: public
    bad = np.argwhere(~(np.abs(c - want) <= RTOL * scale + 1e-30))
    if bad.size:
        i, j = (int(v) for v in bad[0])
        pytest.fail(
            f"{name}[{grid}, {block}] with a of shape {a.shape} and b of shape {b.shape}: "
            f"{len(bad)} of {m * n} elements of c are wrong; first c[{i}, {j}] = {c[i, j]}, "
            f"expected {want[i, j]:.6g} (row {i} of a times column {j} of b). Every output, "
            "including those of the partial tiles at the right and bottom edges, is the full "
            "dot product over K"
        )


@pytest.mark.points(2)
def test_matmul_naive_shapes(student, rng):
    shapes = [(1, 1, 1), (5, 3, 7), (19, 11, 13)]
    shapes += [tuple(int(v) for v in rng.integers(2, 40, size=3)) for _ in range(2)]
    for m, k, n in shapes:
        bx, by = NAIVE_BLOCKS[int(rng.integers(len(NAIVE_BLOCKS)))]
        a, b = _operands(rng, m, k, n)
        _check_product(student, "matmul_naive", a, b, (-(-n // bx), -(-m // by)), (bx, by))


@pytest.mark.points(3)
def test_matmul_tiled_shapes(student, rng):
    shapes = [(1, 1, 1), (33, 35, 37), (32, 64, 32)]
    shapes += [tuple(int(v) for v in rng.integers(2, 49, size=3)) for _ in range(2)]
    for m, k, n in shapes:
        a, b = _operands(rng, m, k, n)
        _check_product(student, "matmul_tiled", a, b, (-(-n // TILE), -(-m // TILE)), (TILE, 1))


def _ptx(student, name: str) -> str:
    try:
        ptx = getattr(student, name).ptx(SIG)
    except StudentError as exc:
        pytest.fail(
            f"{name} does not compile for the course GPU ({SIG}): {exc.feedback()[-800:]}. "
            "Inside a kernel use numbers, array indexing, cuda.* and math, and module-level "
            "integer constants for shared and local array shapes"
        )
    assert isinstance(ptx, str) and ".entry" in ptx, (
        f"compiling {name} for the course GPU did not produce a kernel entry point"
    )
    return ptx


@pytest.mark.points(1)
def test_matmul_naive_compiles_to_ptx(student, rng):
    a, b = _operands(rng, 3, 4, 5)
    _check_product(student, "matmul_naive", a, b, (1, 1), (8, 8))
    _ptx(student, "matmul_naive")


@pytest.mark.points(1)
def test_matmul_tiled_compiles_to_ptx(student, rng):
    a, b = _operands(rng, 3, 40, 5)
    _check_product(student, "matmul_tiled", a, b, (1, 1), (TILE, 1))
    _ptx(student, "matmul_tiled")
