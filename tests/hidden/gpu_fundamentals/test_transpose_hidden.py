"""Hidden tests for S5.1's transposes (never shipped to students).

Matrix shapes and block shapes are drawn at grading time, mostly not multiples of the block or
the tile, and the result is compared with NumPy's transpose. Each kernel is also compiled for the
course GPU; the tiled one must stage its tile in shared memory behind a barrier. Tests marked
`gpu` time the kernels on a GPU runner.

Stated rules (grader verify checks that every test here is listed, with a sentence that appears
word for word in the released notebook):

- test_transpose_naive_shapes: "Any block shape must work, and so must any matrix shape,
  including shapes that are not multiples of the block (bounds-check both coordinates)."
- test_transpose_naive_compiles_to_ptx: "The grader tests float32 matrices in the simulator and
  compiles the kernel for the T4 with the signature `void(float32[:, :], float32[:, :])`."
- test_transpose_tiled_shapes: "Write `transpose_tiled(src, dst)`, same contract as
  `transpose_naive` (any shape, float32), launched with blocks of exactly `(TILE, 1)` threads"
- test_transpose_tiled_compiles_to_ptx: "the grader compiles the kernel for the T4 with the
  signature `void(float32[:, :], float32[:, :])`."
- test_transposes_bandwidth_gpu: "On a GPU runner the grader also times `transpose_tiled` at
  8192 x 8192: it must reach at least **50% of the bandwidth of your own stride-1
  `strided_copy`** on the same elements, and `transpose_naive` must be slower than
  `transpose_tiled`. Each launch is timed on the GPU itself and moves 537 MB, far more than any
  course GPU's L2 cache holds, so the launch cost and the cache do not enter the comparison. The
  bar leaves a margin of about 2x on every course GPU: by the estimate
  above a tiled transpose with a column of loads in flight per lane keeps 60 KB (T4), 128 KB
  (A100, H100, H200) in flight per SM against the 5, 11, 15 and 22 KB the four GPUs need at 600
  ns, so it should run at 90-100% of the copy, while one load at a time per lane (1.9 to 4 KB)
  can fall to 20-40% of the bandwidth and fail it."

PYTEST_DONT_REWRITE: pytest leaves these asserts alone, because their messages are what the
student reads as feedback.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.core.timing import K_IN, Check, describe
from grader.suites.student import StudentError
from grader.suites.testing import expect_written, first_mismatch, launch, unwritten
from grader.suites.timing import KernelTarget, device_of, judge

TILE = 32  # grader: public
SIG_2D = "void(float32[:, :], float32[:, :])"
NAIVE_BLOCKS = ((8, 8), (16, 4), (32, 2), (4, 16), (32, 8))


def _shapes(
    rng: np.random.Generator, near: tuple[int, int], low: int, high: int
) -> list[tuple[int, int]]:
    """Matrix shapes drawn from the student's seed (the `rng` fixture): one row, one column,
    odd sides within 4 of `near`, and two anywhere in [low, high)."""

    def around(v: int) -> int:
        return v + 2 * int(rng.integers(-2, 3))

    return [
        (1, int(rng.integers(1, 40))),
        (int(rng.integers(2, 40)), 1),
        (around(near[0]), around(near[1])),
        *(tuple(int(v) for v in rng.integers(low, high, size=2)) for _ in range(2)),
    ]


def _check_transpose(student, name: str, src: np.ndarray, grid, block) -> None:
    original = src.copy()
    dst = unwritten((src.shape[1], src.shape[0]))
    launch(getattr(student, name), grid, block, src, dst, n=src.size, name=name)  # grader: public
    assert np.array_equal(src, original), f"{name} changed its input src; only dst is written"
    # grader: public
    expect_written(dst, name, "dst")
    want = src.T
    assert np.array_equal(dst, want), (
        f"{name}[{grid}, {block}] on a {src.shape[0]} x {src.shape[1]} float32 matrix: "
        f"{first_mismatch(dst, want)} (dst has shape {dst.shape}). dst[x, y] must be src[y, x] "
        "for every element, including the partial blocks at the right and bottom edges"
    )


@pytest.mark.points(2)
def test_transpose_naive_shapes(student, rng):
    for shape in _shapes(rng, (17, 33), 2, 60):
        bx, by = NAIVE_BLOCKS[int(rng.integers(len(NAIVE_BLOCKS)))]
        grid = (-(-shape[1] // bx), -(-shape[0] // by))
        src = rng.standard_normal(shape).astype(np.float32)
        _check_transpose(student, "transpose_naive", src, grid, (bx, by))


@pytest.mark.points(3)
def test_transpose_tiled_shapes(student, rng):
    for shape in _shapes(rng, (TILE - 1, TILE + 1), 2, 75):
        grid = (-(-shape[1] // TILE), -(-shape[0] // TILE))
        src = rng.standard_normal(shape).astype(np.float32)
        _check_transpose(student, "transpose_tiled", src, grid, (TILE, 1))


def _ptx(student, name: str) -> str:
    try:
        ptx = getattr(student, name).ptx(SIG_2D)
    except StudentError as exc:
        pytest.fail(
            f"{name} does not compile for the course GPU ({SIG_2D}): {exc.feedback()[-800:]}. "
            "Inside a kernel use numbers, array indexing, cuda.* and math, and module-level "
            "integer constants for shared-array shapes"
        )
    assert isinstance(ptx, str) and ".entry" in ptx, (
        f"compiling {name} for the course GPU did not produce a kernel entry point"
    )
    return ptx


@pytest.mark.points(1)
def test_transpose_naive_compiles_to_ptx(student, rng):
    rows, cols = (int(v) for v in rng.integers(2, 9, size=2))
    src = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)
    _check_transpose(student, "transpose_naive", src, (1, 1), (8, 8))
    _ptx(student, "transpose_naive")


@pytest.mark.points(1)
def test_transpose_tiled_compiles_to_ptx(student, rng):
    rows, cols = int(rng.integers(2, 6)), int(rng.integers(TILE + 1, 2 * TILE))
    src = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)
    _check_transpose(student, "transpose_tiled", src, (2, 1), (TILE, 1))
    _ptx(student, "transpose_tiled")


@pytest.mark.gpu
@pytest.mark.points(1)
def test_transposes_bandwidth_gpu(student, rng, course):
    n = 8192
    srcs = [rng.standard_normal((n, n), dtype=np.float32) for _ in range(K_IN)]
    dst = np.zeros((n, n), dtype=np.float32)
    want = {1: [x.T.copy() for x in srcs]}
    nbytes = 2 * srcs[0].nbytes
    tiles = (-(-n // TILE), -(-n // TILE))
    tiled = KernelTarget(
        student.transpose_tiled[tiles, (TILE, 1)], [[x, dst] for x in srcs], want, nbytes
    )
    naive = KernelTarget(
        student.transpose_naive[(n // 32, n // 8), (32, 8)], [[x, dst] for x in srcs], want, nbytes
    )
    flat = [x.reshape(-1) for x in srcs]
    copy = KernelTarget(
        student.strided_copy[n * n // 256, 256],
        [[f, dst.reshape(-1), 1] for f in flat],
        {1: flat},
        nbytes,
    )
    checks = [
        # >= 50% of the copy's bandwidth: at most twice its time
        Check("tiled at least half the copy", "transpose_tiled", "strided_copy", 2.0),
        Check("naive slower than tiled", "transpose_naive", "transpose_tiled", 1.0, below=False),
    ]
    device, _ = device_of(course)
    judged = judge([copy, tiled, naive], checks, device, test="test_transposes_bandwidth_gpu")
    by_half, slower = judged.verdicts
    gbs = {k: nbytes / judged.series[k].stats().median / 1e9 for k in judged.series}
    assert by_half.passed, (
        f"transpose_tiled on 8192 x 8192 float32 ran at {gbs['transpose_tiled']:.0f} GB/s vs "
        f"{gbs['strided_copy']:.0f} GB/s for your stride-1 strided_copy; expected at least 50%. "
        f"{describe(by_half)} Read and write global memory along rows, pad the tile to "
        "TILE_PADDED columns, and let each of the block's TILE lanes move one column of the "
        "tile (TILE elements each way), loading it into a cuda.local.array before storing it "
        "to the tile"
    )
    assert slower.passed, (
        f"transpose_naive was not slower than transpose_tiled. {describe(slower)} The naive "
        "kernel should write dst[x, y] = src[y, x] directly"
    )
