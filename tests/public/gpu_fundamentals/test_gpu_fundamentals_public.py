"""Public tests for S5.1, the GPU mental model.

These are the checks you can run yourself: `pytest tests/public/gpu_fundamentals` from the root of
your repository (the folder holding course.toml); they grade exercises/gpu_fundamentals. They use
the numbers from the notebook, and the kernel tests draw their sizes and values (the `rng`
fixture: the same draws here as in the grading of your pull request); the grader also runs hidden
tests with inputs it draws for you at grading time, so make every function correct in general,
not only here.

Without a GPU your kernels run in Numba's CUDA simulator, so the kernel tests use small sizes.

PYTEST_DONT_REWRITE: the assert messages are the student's feedback, so pytest's own
introspection is not appended to them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from grader.suites.testing import (
    expect_value_error,
    expect_written,
    first_mismatch,
    launch,
    unwritten,
)

H100_FLOPS = 989e12  # H100 SXM dense BF16, FLOP/s
H100_BW = 3.35e12  # H100 SXM HBM3, byte/s


@pytest.mark.points(1)
def test_ridge_point_h100(student):
    got = student.ridge_point(H100_FLOPS, H100_BW)
    assert isinstance(got, float), f"ridge_point must return a float, got {type(got).__name__}"
    want = H100_FLOPS / H100_BW
    assert got == pytest.approx(want, rel=1e-6), (
        f"ridge_point(989e12, 3.35e12) returned {got}; expected {want:.1f} FLOP/byte "
        "(peak_flops / peak_bandwidth, the H100's ridge is about 295)"
    )


@pytest.mark.points(1)
def test_attainable_flops_scalar_and_array(student):
    got = student.attainable_flops(1.0, H100_FLOPS, H100_BW)
    assert isinstance(got, float), (
        f"attainable_flops with a scalar intensity must return a float, got {type(got).__name__}"
    )
    assert got == pytest.approx(H100_BW, rel=1e-9), (
        f"attainable_flops(1.0, 989e12, 3.35e12) returned {got:.4g}; at 1 FLOP/byte the roofline "
        f"gives 1 x bandwidth = {H100_BW:.4g} FLOP/s"
    )
    grid = np.array([0.0, 10.0, 1000.0])
    roof = student.attainable_flops(grid, H100_FLOPS, H100_BW)
    assert isinstance(roof, np.ndarray) and roof.shape == grid.shape, (
        f"attainable_flops with an array of shape {grid.shape} must return an array of that "
        f"shape, got {type(roof).__name__} {getattr(roof, 'shape', '')}"
    )
    want = np.minimum(grid * H100_BW, H100_FLOPS)
    assert np.allclose(roof, want, rtol=1e-9), (
        f"attainable_flops([0, 10, 1000], 989e12, 3.35e12) returned {roof}; expected {want} "
        "(min(intensity * bandwidth, peak))"
    )


@pytest.mark.points(1)
def test_is_memory_bound_examples(student):
    low = student.is_memory_bound(1.0, H100_FLOPS, H100_BW)
    high = student.is_memory_bound(1365.0, H100_FLOPS, H100_BW)
    assert type(low) is bool and type(high) is bool, (
        f"is_memory_bound must return a Python bool (True/False), got {type(low).__name__}; "
        "wrap a numpy comparison in bool(...)"
    )
    assert low is True, "decode at 1 FLOP/byte is far left of the H100 ridge (~295): memory-bound"
    assert high is False, (
        "a 4096^3 BF16 GEMM at 1365 FLOP/byte is right of the ridge: compute-bound"
    )


@pytest.mark.points(1)
def test_launch_config_examples(student):
    got = student.launch_config(1000)
    assert type(got) is tuple and len(got) == 2 and all(type(v) is int for v in got), (
        f"launch_config must return a tuple of two Python ints (blocks, threads_per_block), "
        f"got {got!r}"
    )
    assert got == (4, 256), (
        f"launch_config(1000) returned {got}; 1000 elements at 256 threads per block need "
        "ceil(1000 / 256) = 4 blocks"
    )
    assert student.launch_config(1024, 128) == (8, 128), "1024 elements at 128 per block: 8 blocks"
    expect_value_error(lambda: student.launch_config(0), "launch_config(0)", "n must be at least 1")


@pytest.mark.points(1)
def test_effective_bandwidth_units(student):
    got = student.effective_bandwidth_gbs(12e6, 1.0)
    assert isinstance(got, float) and got == pytest.approx(12.0, rel=1e-9), (
        f"effective_bandwidth_gbs(12e6 bytes, 1.0 ms) returned {got!r}; expected 12.0 GB/s "
        "(bytes / seconds / 1e9, and the time is in milliseconds)"
    )


@pytest.mark.points(1)
def test_sectors_per_warp_examples(student):
    for stride, want, why in (
        (1, 4, "32 consecutive fp32 values are 128 bytes = 4 sectors"),
        (32, 32, "every lane lands in its own 32-byte sector"),
    ):
        got = student.sectors_per_warp(stride)
        assert type(got) is int, f"sectors_per_warp must return a Python int, got {got!r}"
        assert got == want, f"sectors_per_warp({stride}) returned {got}; expected {want}: {why}"


def _not_a_multiple(rng: np.random.Generator, low: int, high: int, of: int) -> int:
    """A drawn size in [low, high) that is not a multiple of `of`: the last block is part empty."""
    n = int(rng.integers(low, high))
    return n + 1 if n % of == 0 else n


@pytest.mark.points(2)
def test_vector_add_small(student, rng):
    n = _not_a_multiple(rng, 257, 1500, 32)  # more threads than elements: the bounds check
    blocks = -(-n // 256)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    c = unwritten(n)
    launch(student.vector_add, blocks, 256, a, b, c, n=n, name="vector_add")
    want = a + b
    expect_written(c, "vector_add", "c")
    assert np.array_equal(c, want), (
        f"vector_add[{blocks}, 256] on {n} elements: "
        + first_mismatch(c, want)
        + " (each thread i should write c[i] = a[i] + b[i], with i = cuda.grid(1))"
    )


@pytest.mark.points(1)
def test_gpu_vector_add_small(student, rng):
    n = _not_a_multiple(rng, 129, 800, 128)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    got = student.gpu_vector_add.launching("vector_add")(a, b, 128)
    assert isinstance(got, np.ndarray) and got.shape == (n,) and got.dtype == np.float32, (
        f"gpu_vector_add of two float32 arrays of shape ({n},) must return a float32 array of "
        f"shape ({n},), got {type(got).__name__} {getattr(got, 'dtype', '')} "
        f"{getattr(got, 'shape', '')}"
    )
    assert np.array_equal(got, a + b), "gpu_vector_add: " + first_mismatch(got, a + b)


@pytest.mark.points(1)
def test_strided_copy_small(student, rng):
    n_src, n_dst = int(rng.integers(300, 600)), _not_a_multiple(rng, 257, 400, 256)
    stride = int(rng.integers(2, 40))
    src = rng.standard_normal(n_src).astype(np.float32)
    dst = unwritten(n_dst)
    blocks = -(-n_dst // 256)
    launch(student.strided_copy, blocks, 256, src, dst, stride, n=n_dst, name="strided_copy")
    want = src[(np.arange(n_dst) * stride) % n_src]
    assert np.array_equal(dst, want), (
        f"strided_copy[{blocks}, 256](src ({n_src} elements), dst ({n_dst} elements), stride "
        f"{stride}): "
        + first_mismatch(dst, want)
        + "; thread i writes dst[i] = src[(i * stride) % src.size]"
    )


@pytest.mark.points(1)
def test_coalescing_slowdown_runs(student):
    # Credited only when the trusted side's launch record shows both kernels launched.
    ratio = student.coalescing_slowdown.timing("transpose_naive", "strided_copy")(16)
    assert isinstance(ratio, float) and math.isfinite(ratio) and ratio > 0, (
        f"coalescing_slowdown(16) returned {ratio!r}; expected a positive float (the time of "
        "your transpose_naive divided by the time of your strided_copy at stride 1)"
    )
    expect_value_error(
        lambda: student.coalescing_slowdown(0),
        "coalescing_slowdown(0)",
        "n is the side of an n x n matrix and must be >= 1",
    )
