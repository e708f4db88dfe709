"""Hidden tests for S5.1's tiled matrix multiply (never shipped to students).

`tiled_intensity` is compared with the reference on drawn tiles and element sizes, with fixed
examples that every seed runs. Both kernels run in the simulator on matrix shapes drawn at
grading time, mostly not multiples of the block or the tile, against NumPy's product, and are
compiled for the course GPU; the tiled one must declare its two shared tiles and a barrier. On
a GPU runner the two kernels are timed by the grader and the tiled one must be the faster.

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
- test_matmul_tiled_compiles_with_shared_tiles: "checks that the compiled kernel declares two
  shared tiles of `TILE x TILE` float32 values (4,096 bytes each) and a barrier."
- test_matmul_tiled_beats_naive_gpu: "On a GPU runner it also times both kernels on 2048 x 2048
  matrices: `matmul_tiled` must take less time than `matmul_naive` launched with 32 x 8
  blocks. Load each column into a `cuda.local.array` first and then store it to the tile, as in
  the transpose of §8, so that a lane has 32 loads in flight: the tiled kernel should then take
  half the naive one's time or less on a T4, an A100, an H100 and an H200, a margin of 2x."

PYTEST_DONT_REWRITE: pytest leaves these asserts alone, because their messages are what the
student reads as feedback.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from grader.core.timing import K_IN, Check, describe
from grader.suites.student import StudentError
from grader.suites.testing import expect_value_error, launch
from grader.suites.timing import KernelTarget, device_of, judge

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
    c = np.full((m, n), np.nan, dtype=np.float32)  # grader: public
    launch(getattr(student, name), grid, block, a, b, c, n=m * n, name=name)  # grader: public
    assert np.array_equal(a, a0) and np.array_equal(b, b0), (
        f"{name} changed its inputs a or b; a kernel must only write c"
    )
    # grader: public
    assert not np.isnan(c).all(), f"{name} wrote nothing into c: fill in the kernel's body"
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


def shared_tile_problem(ptx: str) -> str | None:
    """Why the PTX does not stage two TILE x TILE float32 tiles behind a barrier, or None."""
    sizes = [int(v) for v in re.findall(r"\.shared\s+\.align\s+\d+\s+\.b8\s+\w+\[(\d+)\]", ptx)]
    tile_bytes = TILE * TILE * 4
    if sizes.count(tile_bytes) < 2:
        return (
            f"its PTX declares shared arrays of {sizes or 'no'} bytes; two tiles "
            f"cuda.shared.array((TILE, TILE), numba.float32) of {tile_bytes} bytes each are "
            "needed, one for a and one for b, so that every element loaded from global memory "
            "is reused TILE times"
        )
    if not re.search(r"\bbar(rier)?\.sync\b", ptx):
        return (
            "its PTX has no barrier: call cuda.syncthreads() after filling the tiles and again "
            "before the next step overwrites them"
        )
    return None


@pytest.mark.points(2)
def test_matmul_tiled_compiles_with_shared_tiles(student, rng):
    a, b = _operands(rng, 3, 40, 5)
    _check_product(student, "matmul_tiled", a, b, (1, 1), (TILE, 1))
    problem = shared_tile_problem(_ptx(student, "matmul_tiled"))
    assert problem is None, f"matmul_tiled compiles, but {problem}"


@pytest.mark.gpu
@pytest.mark.points(1)
def test_matmul_tiled_beats_naive_gpu(student, rng, course):
    n = 2048
    pairs = [_operands(rng, n, n, n) for _ in range(K_IN)]
    c = np.zeros((n, n), dtype=np.float32)
    want = {2: [(a.astype(np.float64) @ b).astype(np.float32) for a, b in pairs]}
    tol = {2: [RTOL * (np.abs(a) @ np.abs(b)) + 1e-5 for a, b in pairs]}
    variants = [[a, b, c] for a, b in pairs]
    nbytes = 3 * 4 * n * n  # a and b read and c written at least once
    tiled = KernelTarget(
        student.matmul_tiled[(n // TILE, n // TILE), (TILE, 1)], variants, want, nbytes, tol
    )
    naive = KernelTarget(
        student.matmul_naive[(n // 32, n // 8), (32, 8)], variants, want, nbytes, tol
    )
    check = Check("tiled faster than naive", "matmul_tiled", "matmul_naive", 1.0)
    device, _ = device_of(course)
    judged = judge([naive, tiled], [check], device, test="test_matmul_tiled_beats_naive_gpu")
    (verdict,) = judged.verdicts
    flops = 2 * n**3
    ms = {k: judged.series[k].stats().median * 1e3 for k in judged.series}
    assert verdict.passed, (
        f"matmul_tiled took {ms['matmul_tiled']:.2f} ms "
        f"({flops / ms['matmul_tiled'] / 1e9:.0f} GFLOP/s) on {n} x {n} float32 matrices, "
        f"matmul_naive {ms['matmul_naive']:.2f} ms; the tiled kernel must be faster. "
        f"{describe(verdict)} Load each tile once per step (a column per lane into a "
        "cuda.local.array, then into the shared tile), reuse it TILE times from shared memory, "
        "keep the sums in cuda.local.array(TILE, numba.float32) and accumulate in float32"
    )
