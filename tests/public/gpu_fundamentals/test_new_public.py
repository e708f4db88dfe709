"""Public tests for S5.1's divergence, occupancy, warp sum, transpose and matrix-multiply exercises.

Run them with the rest of the public suite: `pytest tests/public/gpu_fundamentals` from the root
of your repository. They use the notebook's examples, and draw the kernels' matrix shapes and
values (never multiples of the block or tile; the same draws here as in the grading of your pull
request); the grader's hidden tests draw their own launch shapes, branch patterns and matrix
shapes for you at grading time, and compare occupancy with their own copy of CUDA's occupancy
rules on a thousand launch shapes.

PYTEST_DONT_REWRITE: the assert messages are the student's feedback, so pytest's own
introspection is not appended to them.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.suites.testing import expect_written, first_mismatch, launch, unwritten

TILE = 32


@pytest.mark.points(1)
def test_divergence_efficiency_examples(student):
    lanes = np.arange(32)
    for pattern, want, why in (
        ([True] * 32, 1.0, "all lanes agree"),
        (list(lanes % 2 == 0), 0.5, "even and odd lanes split: both sides run"),
        (list(lanes == 7), 0.5, "a single lane apart still costs a whole pass"),
    ):
        got = student.divergence_efficiency(pattern)
        assert type(got) is float and got == want, (
            f"divergence_efficiency returned {got!r} for a warp where {why}; expected {want}"
        )


@pytest.mark.points(1)
def test_occupancy_examples(student, course):
    t4, h100 = course.hardware["T4"].sm.as_dict(), course.hardware["H100_SXM"].sm.as_dict()
    for args, sm, gpu, want in (
        ((256, 32, 0), t4, "T4", (4, 32, 1.0, "threads")),
        ((256, 64, 0), h100, "H100_SXM", (4, 32, 0.5, "registers")),
        ((32, 16, 0), t4, "T4", (16, 16, 0.5, "blocks")),
        ((128, 32, 40 * 1024), h100, "H100_SXM", (5, 20, 20 / 64, "shared_memory")),
        ((96, 40, 0), h100, "H100_SXM", (16, 48, 0.75, "registers")),
        ((128, 32, 38397), h100, "H100_SXM", (5, 20, 20 / 64, "shared_memory")),
        ((256, 65, 0), t4, "T4", (3, 24, 0.75, "registers")),
    ):
        got = student.occupancy(*args, sm)
        keys = ("blocks_per_sm", "warps_per_sm", "occupancy", "limited_by")
        assert isinstance(got, dict) and tuple(got.get(k) for k in keys) == want, (
            f"occupancy{args + ('sm_limits(' + repr(gpu) + ')',)} returned {got!r}; expected "
            f"{dict(zip(keys, want, strict=True))}"
        )


def _shape(rng: np.random.Generator, low: int, high: int) -> int:
    """A drawn side in [low, high) that is not a multiple of 8 (nor of TILE)."""
    side = int(rng.integers(low, high))
    return side + 1 if side % 8 == 0 else side


def _transpose(student, rng, name: str, block: tuple[int, int], covers: int) -> None:
    """A drawn rows x cols matrix, each block covering `covers` x `covers` elements."""
    shape = (_shape(rng, 33, 48), _shape(rng, 17, 40))
    grid = (-(-shape[1] // covers), -(-shape[0] // covers))
    src = rng.standard_normal(shape).astype(np.float32)
    dst = unwritten((shape[1], shape[0]))
    launch(getattr(student, name), grid, block, src, dst, n=src.size, name=name)
    expect_written(dst, name, "dst")
    assert np.array_equal(dst, src.T), (
        f"{name}[{grid}, {block}] on a {shape[0]} x {shape[1]} matrix: "
        f"{first_mismatch(dst, src.T)}; dst[x, y] must be src[y, x]"
    )


@pytest.mark.points(1)
def test_transpose_naive_small(student, rng):
    _transpose(student, rng, "transpose_naive", (8, 8), 8)


@pytest.mark.points(1)
def test_transpose_tiled_small(student, rng):
    _transpose(student, rng, "transpose_tiled", (TILE, 1), TILE)


@pytest.mark.points(1)
def test_tiled_intensity_examples(student):
    for args, want in (((1,), 0.25), ((32,), 8.0), ((16, 2), 8.0)):
        got = student.tiled_intensity(*args)
        assert type(got) is float and got == want, (
            f"tiled_intensity{args} returned {got!r}; expected {want} FLOP/byte "
            "(2 tile^3 FLOPs over 2 tile^2 itemsize bytes)"
        )


def _matmul(student, rng, name: str, block: tuple[int, int], covers: int) -> None:
    """A drawn (m x k) @ (k x n) product, each block covering `covers` x `covers` of c, more
    than one block each way."""
    m, k, n = (_shape(rng, covers + 1, covers + 16) for _ in range(3))
    grid = (-(-n // covers), -(-m // covers))
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = unwritten((m, n))
    launch(getattr(student, name), grid, block, a, b, c, n=m * n, name=name)
    expect_written(c, name, "c")
    want = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    ok = np.abs(c - want) <= 1e-4 * scale
    assert ok.all(), (
        f"{name}[{grid}, {block}] on a ({m} x {k}) @ ({k} x {n}) product: "
        f"{first_mismatch(c, want, ok)}; c[y, x] must be row y of a times "
        "column x of b"
    )


@pytest.mark.points(1)
def test_matmul_naive_small(student, rng):
    _matmul(student, rng, "matmul_naive", (8, 8), 8)


@pytest.mark.points(1)
def test_matmul_tiled_small(student, rng):
    _matmul(student, rng, "matmul_tiled", (TILE, 1), TILE)


@pytest.mark.points(1)
def test_warp_sum_small(student, rng):
    n = int(rng.integers(33, 300)) | 1  # never a whole number of warps: the last one is partial
    x = rng.standard_normal(n).astype(np.float32)
    out = unwritten(-(-n // 32))
    launch(student.warp_sum, -(-n // 64), 64, x, out, n=n, name="warp_sum")
    expect_written(out, "warp_sum", "out")
    want = np.add.reduceat(x.astype(np.float64), np.arange(0, n, 32))
    ok = np.isclose(out, want, rtol=1e-5, atol=1e-4)
    assert ok.all(), (
        f"warp_sum[{-(-n // 64)}, 64] on {n} elements: {first_mismatch(out, want, ok)}; "
        "warp w sums x[32 * w] to x[32 * w + 31] (lanes past the end add 0), lane 0 writes "
        "out[w]"
    )
