"""Hidden tests for S5.1 (never shipped to students).

Inputs are drawn at grading time and compared with the reference solution (the `reference`
fixture, loaded in the trusted grader process), so a submission cannot pass by hard-coding the
public examples. Kernels run in Numba's CUDA simulator without a GPU (small sizes, no hypothesis:
about 10 us per simulated thread, more in a kernel that loops) and are also compiled to PTX for
the course GPU. Tests marked `gpu` run only on a GPU runner, at full size, and include the
performance checks.

Stated rules (grader verify checks that every test here is listed, with a sentence that appears
word for word in the released notebook):

- test_ridge_point_random_hardware: "Units: FLOP/s and byte/s in, FLOP/byte out, returned as a
  Python `float`."
- test_attainable_flops_scalar_random: "It must accept a single intensity (return a Python
  `float`)"
- test_attainable_flops_array_random: "and also a NumPy array of intensities (return an array of
  the same shape, computed without a Python loop"
- test_is_memory_bound_random: "Exactly at the ridge both limits are equal; call that
  compute-bound. Return a plain Python `bool` (not `numpy.bool_`)."
- test_invalid_input_raises_value_error: "A value of the right type that is out of range raises
  `ValueError`: zero, negative, NaN, infinite, too large"
- test_launch_config_random: "The grader checks `n` up to `2**62`, where a float `math.ceil(n /
  tpb)` is off by one"
- test_effective_bandwidth_random: "result in **GB/s with 1 GB = 10⁹ bytes** (the unit GPU
  datasheets use), as a Python `float`."
- test_sectors_per_warp_random: "so count every sector from the one holding an element's first
  byte to the one holding its last."
- test_vector_add_sizes: "Sizes from 1 to a few thousand on several blocks"
- test_vector_add_float64: "`a`, `b` and `c` are 1-D arrays of one float dtype, float32 or
  float64 (both are tested), and the sum must keep that dtype's precision, so do not convert
  inside the kernel."
- test_vector_add_compiles_to_ptx: "the PTX compile for the T4 (signature `void(float32[:],
  float32[:], float32[:])`)"
- test_gpu_vector_add_random: "The output has the inputs' dtype (NumPy's common dtype if they
  differ), and an empty input gives an empty output."
- test_strided_copy_strides: "`src` and `dst` are 1-D float32 arrays (`dst` may be shorter than
  `src`), `stride` an integer >= 0, several blocks"
- test_strided_copy_compiles_to_ptx: "the PTX compile for the T4 with the signature
  `void(float32[:], float32[:], int64)`"
- test_vector_add_bandwidth: "One element per thread should reach 90-100% of the grader's kernel
  on a T4, an A100, an H100 and an H200, a margin of 1.5x or more over the bar."
- test_coalescing_slowdown_gpu: "On a GPU runner the grader calls `coalescing_slowdown(8192)` and
  expects **at least 1.5**, and it times your two kernels itself: your returned ratio must be
  within a factor of 2 of the ratio it measures, each launch timed on the GPU itself, the two
  kernels in turn. A naive transpose of that size should take 2 to 4 times as long as the copy on
  a T4, an A100, an H100 and an H200 (its strided writes cost 32 sectors per warp where the copy's
  cost 4), a margin of 1.3x or more over 1.5."

PYTEST_DONT_REWRITE: pytest leaves these asserts alone, because their messages are what the
student reads as feedback.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from grader.core.timing import K_IN, Check, describe
from grader.suites.student import StudentError
from grader.suites.testing import (
    expect_value_error,
    expect_written,
    first_mismatch,
    launch,
    unwritten,
)
from grader.suites.timing import KernelTarget, baseline_add, device_of, judge

FAST = settings.get_profile("grader-hidden")  # tests/hidden/conftest.py
peak_flops = st.floats(min_value=1e9, max_value=1e17)  # FLOP/s
peak_bandwidth = st.floats(min_value=1e8, max_value=1e14)  # byte/s
BLOCK_SIZES = (32, 64, 128, 256, 512)
VEC_SIG = "void(float32[:], float32[:], float32[:])"
COPY_SIG = "void(float32[:], float32[:], int64)"
FULL_N = 2**24


# ---------------------------------------------------------------------------------------------
# Roofline arithmetic


@pytest.mark.points(1)  # grader: public
@FAST
@given(flops=peak_flops, bandwidth=peak_bandwidth)
def test_ridge_point_random_hardware(student, reference, flops, bandwidth):
    got = student.ridge_point(flops, bandwidth)
    want = reference.ridge_point(flops, bandwidth)
    # grader: public
    assert isinstance(got, float), f"ridge_point must return a float, got {type(got).__name__}"
    assert got == pytest.approx(want, rel=1e-9), (
        f"ridge_point({flops!r}, {bandwidth!r}) returned {got!r}; expected {want!r} FLOP/byte "
        "(peak_flops in FLOP/s divided by peak_bandwidth in byte/s)"
    )


@pytest.mark.points(1)
@FAST
@given(
    intensity=st.floats(min_value=0.0, max_value=1e6), flops=peak_flops, bandwidth=peak_bandwidth
)
def test_attainable_flops_scalar_random(student, reference, intensity, flops, bandwidth):
    got = student.attainable_flops(intensity, flops, bandwidth)
    want = reference.attainable_flops(intensity, flops, bandwidth)
    assert isinstance(got, float), (  # grader: public
        # grader: public
        f"attainable_flops with a scalar intensity must return a float, got {type(got).__name__}"
    )
    assert got == pytest.approx(want, rel=1e-9), (
        f"attainable_flops({intensity!r}, {flops!r}, {bandwidth!r}) returned {got!r}; expected "
        f"{want!r} FLOP/s = min(intensity * peak_bandwidth, peak_flops)"
    )


@pytest.mark.points(1)
@FAST
@given(
    values=st.lists(st.floats(min_value=0.0, max_value=1e5), min_size=2, max_size=24),
    two_d=st.booleans(),
    flops=peak_flops,
    bandwidth=peak_bandwidth,
)
def test_attainable_flops_array_random(student, reference, values, two_d, flops, bandwidth):
    intensity = np.array(values[: len(values) // 2 * 2], dtype=np.float64)
    if two_d:
        intensity = intensity.reshape(2, -1)
    got = student.attainable_flops(intensity, flops, bandwidth)
    want = reference.attainable_flops(intensity, flops, bandwidth)
    assert isinstance(got, np.ndarray) and got.shape == intensity.shape, (
        f"attainable_flops with an array of shape {intensity.shape} must return a numpy array "
        f"of the same shape, got {type(got).__name__} {getattr(got, 'shape', '')}"
    )
    assert np.allclose(got, want, rtol=1e-9, atol=0), (
        f"attainable_flops(array, {flops!r}, {bandwidth!r}) is wrong elementwise: "
        + first_mismatch(got, want)
        + "; use np.minimum(intensity * bandwidth, peak)"
    )
    # a list of numbers is an array too (the error convention's settled cases)
    listed = student.attainable_flops(intensity.tolist(), flops, bandwidth)
    assert isinstance(listed, np.ndarray) and listed.shape == intensity.shape, (
        f"attainable_flops with a list of shape {intensity.shape} must return a numpy array of "
        f"the same shape, got {type(listed).__name__} {getattr(listed, 'shape', '')}"
    )
    assert np.allclose(listed, want, rtol=1e-9, atol=0), (
        "attainable_flops(list, ...) is wrong elementwise: " + first_mismatch(listed, want)
    )


@pytest.mark.points(2)  # grader: public
@FAST
@given(
    intensity=st.floats(min_value=0.0, max_value=1e5), flops=peak_flops, bandwidth=peak_bandwidth
)
def test_is_memory_bound_random(student, reference, intensity, flops, bandwidth):
    ridge = flops / bandwidth
    assume(abs(intensity - ridge) > 1e-9 * ridge)  # exactly-at-ridge is checked below
    got = student.is_memory_bound(intensity, flops, bandwidth)
    want = reference.is_memory_bound(intensity, flops, bandwidth)
    assert type(got) is bool, (
        f"is_memory_bound must return a Python bool, got {type(got).__name__}; wrap a numpy "
        "comparison in bool(...)"
    )
    assert got is want, (  # grader: public
        f"is_memory_bound({intensity!r}, {flops!r}, {bandwidth!r}) returned {got}; the ridge is "
        f"{ridge:.6g} FLOP/byte, so the answer is {want}"
    )
    # At the ridge itself both limits are equal: that is compute-bound (exact binary numbers).
    at = student.is_memory_bound(200.0, 200e12, 1e12)
    assert at is False, (
        f"is_memory_bound(200.0, 200e12, 1e12) returned {at}; intensity equal to the ridge "
        "(200 FLOP/byte) is not memory-bound: use a strict `<`"
    )


INVALID = [
    ("ridge_point(0, 3.35e12)", lambda s: s.ridge_point(0.0, 3.35e12), "peaks must be > 0"),
    ("ridge_point(989e12, -1)", lambda s: s.ridge_point(989e12, -1.0), "bandwidth must be > 0"),
    (
        "attainable_flops(-0.5, ...)",
        lambda s: s.attainable_flops(-0.5, 1e12, 1e11),
        "a negative intensity has no meaning",
    ),
    (
        "attainable_flops(array with -2, ...)",
        lambda s: s.attainable_flops(np.array([1.0, -2.0]), 1e12, 1e11),
        "check every element of an array intensity",
    ),
    (
        "attainable_flops(1, 0, bw)",
        lambda s: s.attainable_flops(1.0, 0.0, 1e11),
        "peak_flops must be > 0",
    ),
    (
        "attainable_flops(1, peak, -5)",
        lambda s: s.attainable_flops(1.0, 1e12, -5.0),
        "peak_bandwidth must be > 0",
    ),
    (
        "is_memory_bound(-1, ...)",
        lambda s: s.is_memory_bound(-1.0, 1e12, 1e11),
        "a negative intensity has no meaning",
    ),
    (
        "is_memory_bound(1, -1e12, bw)",
        lambda s: s.is_memory_bound(1.0, -1e12, 1e11),
        "peak_flops must be > 0",
    ),
    ("launch_config(0)", lambda s: s.launch_config(0), "n must be >= 1"),
    ("launch_config(-5)", lambda s: s.launch_config(-5), "n must be >= 1"),
    (
        "launch_config(100, 0)",
        lambda s: s.launch_config(100, 0),
        "threads_per_block must be in 1..1024",
    ),
    (
        "launch_config(100, 1025)",
        lambda s: s.launch_config(100, 1025),
        "CUDA allows at most 1024 threads per block",
    ),
    (
        "effective_bandwidth_gbs(1e6, 0)",
        lambda s: s.effective_bandwidth_gbs(1e6, 0.0),
        "elapsed time must be > 0",
    ),
    (
        "effective_bandwidth_gbs(1e6, -1)",
        lambda s: s.effective_bandwidth_gbs(1e6, -1.0),
        "elapsed time must be > 0",
    ),
    (
        "effective_bandwidth_gbs(-1, 1)",
        lambda s: s.effective_bandwidth_gbs(-1, 1.0),
        "a byte count cannot be negative",
    ),
    ("sectors_per_warp(-1)", lambda s: s.sectors_per_warp(-1), "stride must be >= 0"),
    (
        "sectors_per_warp(1, itemsize=0)",
        lambda s: s.sectors_per_warp(1, itemsize=0),
        "sizes must be positive",
    ),
    (
        "sectors_per_warp(1, warp_size=0)",
        lambda s: s.sectors_per_warp(1, warp_size=0),
        "sizes must be positive",
    ),
    (
        "sectors_per_warp(1, sector_bytes=0)",
        lambda s: s.sectors_per_warp(1, sector_bytes=0),
        "sizes must be positive",
    ),
    (
        "gpu_vector_add(shape (4,), shape (5,))",
        lambda s: s.gpu_vector_add(np.ones(4, np.float32), np.ones(5, np.float32)),
        "a and b must have the same shape",
    ),
    ("coalescing_slowdown(0)", lambda s: s.coalescing_slowdown(0), "n must be >= 1"),
]


@pytest.mark.points(3)
@pytest.mark.parametrize("what,call,hint", INVALID, ids=[case[0] for case in INVALID])
def test_invalid_input_raises_value_error(student, what, call, hint):
    expect_value_error(lambda: call(student), what, hint)


@pytest.mark.points(1)
@FAST
@given(
    n=st.one_of(st.integers(1, 2**40), st.integers(2**53, 2**62)),
    tpb=st.integers(min_value=1, max_value=1024),
)
@example(n=2**53 + 1, tpb=256)  # float: 2**45 blocks, one short
@example(n=2**62 + 1, tpb=1)
@example(n=2**60 + 1000, tpb=1000)
def test_launch_config_random(student, n, tpb):
    got = student.launch_config(n, tpb)
    want = (-(-n // tpb), tpb)
    # grader: public
    assert type(got) is tuple and len(got) == 2 and all(type(v) is int for v in got), (
        f"launch_config must return a tuple of two Python ints, got {got!r}"
    )
    assert got == want, (  # grader: public
        f"launch_config({n}, {tpb}) returned {got}; expected {want}: ceil(n / threads_per_block) "
        "blocks, computed with integers ((n + tpb - 1) // tpb) so huge n does not round"
    )


@pytest.mark.points(1)
@FAST
@given(
    nbytes=st.integers(min_value=0, max_value=10**15), ms=st.floats(min_value=1e-6, max_value=1e6)
)
def test_effective_bandwidth_random(student, reference, nbytes, ms):
    got = student.effective_bandwidth_gbs(nbytes, ms)
    want = reference.effective_bandwidth_gbs(nbytes, ms)
    assert isinstance(got, float) and got == pytest.approx(want, rel=1e-9, abs=1e-12), (
        f"effective_bandwidth_gbs({nbytes}, {ms!r}) returned {got!r}; expected {want!r} GB/s: "
        "bytes / (milliseconds / 1000) / 1e9"
    )


@pytest.mark.points(2)
@FAST
@given(
    stride=st.one_of(st.integers(min_value=0, max_value=40), st.integers(0, 5000)),
    itemsize=st.one_of(st.sampled_from([1, 2, 4, 8, 12, 16, 24, 64, 100]), st.integers(1, 300)),
    warp_size=st.sampled_from([32, 32, 32, 16, 64]),
    sector_bytes=st.sampled_from([32, 32, 32, 64, 128]),
)
@example(stride=1, itemsize=64, warp_size=32, sector_bytes=32)  # 64: two sectors per element
@example(stride=3, itemsize=12, warp_size=32, sector_bytes=32)  # 36: some elements straddle
@example(stride=0, itemsize=64, warp_size=32, sector_bytes=32)  # 2: one element, two sectors
@example(stride=5, itemsize=10**6, warp_size=32, sector_bytes=32)  # ranges, not bytes
def test_sectors_per_warp_random(student, reference, stride, itemsize, warp_size, sector_bytes):
    got = student.sectors_per_warp(
        stride, itemsize=itemsize, warp_size=warp_size, sector_bytes=sector_bytes
    )
    want = reference.sectors_per_warp(
        stride, itemsize=itemsize, warp_size=warp_size, sector_bytes=sector_bytes
    )
    # grader: public
    assert type(got) is int, f"sectors_per_warp must return a Python int, got {got!r}"
    assert got == want, (
        f"sectors_per_warp({stride}, itemsize={itemsize}, warp_size={warp_size}, "
        f"sector_bytes={sector_bytes}) returned {got}; expected {want}. Lane l reads the "
        "itemsize bytes from l * stride * itemsize; count every sector from its first byte's "
        "to its last byte's, each sector once"
    )


# ---------------------------------------------------------------------------------------------
# Kernels in the simulator (small sizes, random data and block sizes) and their PTX
#
# Every size is drawn from the student's seed (the `rng` fixture, grader.suites.seeds) within the
# simulator's budget (no draw launches more threads than the fixed sizes these tests used before),
# so a kernel right only at the sizes a suite names cannot pass, and the size a failure quotes is
# that student's own draw.


def _size(rng: np.random.Generator, kind: str) -> int:
    """One vector length of a kind: tiny, odd, a block and a bit, just under a power of two,
    or a few thousand that is not a multiple of a warp."""
    if kind == "tiny":
        return int(rng.integers(1, 9))
    if kind == "odd":
        return 2 * int(rng.integers(5, 128)) + 1
    if kind == "block_plus":
        return int(rng.choice(BLOCK_SIZES[:4])) + int(rng.integers(1, 32))
    if kind == "pow2_minus":
        return 2 ** int(rng.integers(8, 12)) - int(rng.integers(1, 32))
    n = int(rng.integers(1000, 2500))
    return n + 1 if n % 32 == 0 else n


@pytest.mark.points(4)
@pytest.mark.parametrize("kind", ["tiny", "odd", "block_plus", "pow2_minus", "thousands"])
def test_vector_add_sizes(student, rng, kind):
    n = _size(rng, kind)
    # More than one block whenever n allows it, so a kernel that forgets the block offset fails.
    fitting = [t for t in BLOCK_SIZES if t < n] or [min(BLOCK_SIZES)]
    tpb = int(rng.choice(fitting))
    blocks = -(-n // tpb)
    a = rng.standard_normal(n).astype(np.float32)  # grader: public
    b = rng.standard_normal(n).astype(np.float32)  # grader: public
    a0, b0 = a.copy(), b.copy()
    c = unwritten(n)  # grader: public
    launch(student.vector_add, blocks, tpb, a, b, c, n=n, name="vector_add")
    assert np.array_equal(a, a0) and np.array_equal(b, b0), (
        f"vector_add[{blocks}, {tpb}] changed its inputs a or b; a kernel must only write c"
    )
    want = a + b  # grader: public
    expect_written(c, "vector_add", "c")  # grader: public
    assert np.array_equal(c, want), (  # grader: public
        f"vector_add[{blocks}, {tpb}] on {n} elements: {first_mismatch(c, want)}. Each thread "
        "must use its global index i = cuda.grid(1) (block offset included) and write "
        "c[i] = a[i] + b[i]"
    )


@pytest.mark.points(1)
def test_vector_add_float64(student, rng):
    n, tpb = int(rng.integers(129, 300)) | 1, 128
    a = rng.standard_normal(n)
    b = rng.standard_normal(n)
    c = unwritten(n, np.float64)
    launch(student.vector_add, -(-n // tpb), tpb, a, b, c, n=n, name="vector_add")
    assert np.array_equal(c, a + b), (
        f"vector_add on float64 arrays: {first_mismatch(c, a + b)}. Do not cast inside the "
        "kernel: the sum must keep the arrays' float64 precision"
    )


def _compiles(student, name: str, signature: str) -> None:
    try:
        ptx = getattr(student, name).ptx(signature)
    except StudentError as exc:  # grader: public
        pytest.fail(  # grader: public
            f"{name} runs in the simulator but does not compile for the course GPU "
            f"({signature}): {exc.feedback()[-800:]}. The simulator runs any Python; a real GPU "
            "only accepts what Numba can compile (numbers and arrays, no lists, dicts, strings "
            "or numpy functions inside a kernel)"
        )
    assert isinstance(ptx, str) and ".entry" in ptx, (
        f"compiling {name} for the course GPU did not produce a kernel entry point"
    )


@pytest.mark.points(1)
def test_vector_add_compiles_to_ptx(student, rng):
    n = int(rng.integers(33, 64))
    a = np.arange(n, dtype=np.float32)
    c = unwritten(n)
    blocks = -(-n // 32)
    launch(student.vector_add, blocks, 32, a, a, c, n=n, name="vector_add")
    assert np.array_equal(c, a + a), (
        f"vector_add[{blocks}, 32] on {n} elements: {first_mismatch(c, a + a)}"
    )
    _compiles(student, "vector_add", VEC_SIG)


@pytest.mark.points(2)
def test_gpu_vector_add_random(student, rng):
    tpbs = [int(rng.choice(BLOCK_SIZES)) for _ in range(2)]
    # Always more than one block: a wrapper that rounds the grid down or a kernel without the
    # block offset must fail.
    n = int(rng.integers(tpbs[0] + 1, 3 * tpbs[0]))
    shape2 = (int(rng.integers(2, 6)), int(rng.integers(tpbs[1] // 2 + 1, tpbs[1])))
    cases = (((n,), np.float32), (shape2, np.float64))
    for (shape, dtype), tpb in zip(cases, tpbs, strict=True):
        a = rng.standard_normal(shape).astype(dtype)
        b = rng.standard_normal(shape).astype(dtype)
        got = student.gpu_vector_add.launching("vector_add")(a, b, threads_per_block=tpb)
        assert isinstance(got, np.ndarray), (
            f"gpu_vector_add must return a numpy array, got {type(got).__name__}"
        )
        assert got.shape == shape and got.dtype == dtype, (
            f"gpu_vector_add of two {np.dtype(dtype).name} arrays of shape {shape} returned "
            f"{got.dtype} of shape {got.shape}; keep the inputs' dtype and shape (flatten for the "
            "launch, reshape the result)"
        )
        assert np.array_equal(got, a + b), (
            f"gpu_vector_add({np.dtype(dtype).name}, shape {shape}, threads_per_block={tpb}): "
            + first_mismatch(got, a + b)
        )


@pytest.mark.points(2)
@pytest.mark.parametrize("stride", [1, 2, 31, 32, 33])
def test_strided_copy_strides(student, rng, stride):
    n_src, n_dst = 2 * int(rng.integers(128, 300)) + 1, int(rng.integers(65, 200))
    tpb = int(rng.choice((32, 64)))
    blocks = -(-n_dst // tpb)
    src = rng.standard_normal(n_src).astype(np.float32)
    dst = unwritten(n_dst)
    launch(student.strided_copy, blocks, tpb, src, dst, stride, n=n_dst, name="strided_copy")
    want = src[(np.arange(n_dst) * stride) % n_src]
    expect_written(dst, "strided_copy", "dst")
    assert np.array_equal(dst, want), (  # grader: public
        f"strided_copy with stride {stride} (src {n_src} elements, dst {n_dst}, {blocks} x {tpb} "
        f"threads): {first_mismatch(dst, want)}. Thread i writes dst[i] = "
        "src[(i * stride) % src.size], for i < dst.size only"
    )


@pytest.mark.points(1)
def test_strided_copy_compiles_to_ptx(student, rng):
    n_src, n_dst = int(rng.integers(40, 100)), int(rng.integers(33, 64))
    src = np.arange(n_src, dtype=np.float32)
    dst = unwritten(n_dst)
    blocks = -(-n_dst // 32)
    launch(student.strided_copy, blocks, 32, src, dst, 3, n=n_dst, name="strided_copy")
    want = src[(np.arange(n_dst) * 3) % n_src]
    assert np.array_equal(dst, want), (
        f"strided_copy[{blocks}, 32], stride 3, src {n_src} and dst {n_dst} elements: "
        f"{first_mismatch(dst, want)}"
    )
    _compiles(student, "strided_copy", COPY_SIG)


# ---------------------------------------------------------------------------------------------
# On a GPU runner only: full size and performance


@pytest.mark.gpu
@pytest.mark.points(1)
def test_vector_add_bandwidth(student, rng, course):
    n, tpb = FULL_N, 256
    blocks = -(-n // tpb)
    a = [rng.standard_normal(n, dtype=np.float32) for _ in range(K_IN)]
    b = [rng.standard_normal(n, dtype=np.float32) for _ in range(K_IN)]
    c = np.zeros(n, dtype=np.float32)
    want = [x + y for x, y in zip(a, b, strict=True)]
    nbytes = 3 * 4 * n
    # Both staged, launched and timed by the same harness in the kernel worker (each launch
    # between CUDA events), in turn round by round (grader.suites.timing), every output checked.
    kernel = KernelTarget(
        student.vector_add[blocks, tpb],
        [[x, y, c] for x, y in zip(a, b, strict=True)],
        {2: want},
        nbytes,
    )
    base = baseline_add(student, list(zip(a, b, strict=True)), want, nbytes, tpb)
    device, _ = device_of(course)
    check = Check("vector_add vs the grader's a + b", "vector_add", base.label, 1 / 0.6)
    (verdict,) = judge([base, kernel], [check], device, test="test_vector_add_bandwidth").verdicts
    assert verdict.passed, (
        f"vector_add on 2**24 float32 elements reached {100 / verdict.ratio.median:.0f}% of the "
        "bandwidth of the grader's own one-element-per-thread a + b kernel in the same run; "
        f"expected at least 60%. {describe(verdict)} One element per thread with coalesced "
        "loads, no extra work in the kernel"
    )


@pytest.mark.gpu
@pytest.mark.points(1)
def test_coalescing_slowdown_gpu(student, rng, course):
    n = 8192
    ratio = student.coalescing_slowdown.timing("transpose_naive", "strided_copy")(n)
    assert isinstance(ratio, float) and math.isfinite(ratio), (
        f"coalescing_slowdown({n}) returned {ratio!r}; expected a float"
    )
    srcs = [rng.standard_normal((n, n), dtype=np.float32) for _ in range(K_IN)]
    dst = np.zeros((n, n), dtype=np.float32)
    nbytes = 2 * srcs[0].nbytes
    naive = KernelTarget(
        student.transpose_naive[(n // 32, n // 8), (32, 8)],
        [[x, dst] for x in srcs],
        {1: [x.T.copy() for x in srcs]},
        nbytes,
    )
    flat = [x.reshape(-1) for x in srcs]
    copy = KernelTarget(
        student.strided_copy[n * n // 256, 256],
        [[f, dst.reshape(-1), 1] for f in flat],
        {1: flat},
        nbytes,
    )
    assert ratio >= 1.5, (
        f"coalescing_slowdown({n}) returned {ratio:.2f}; on a GPU your transpose_naive of an "
        f"{n} x {n} float32 matrix should take at least 1.5x as long as a stride-1 strided_copy "
        "of the same elements. Time both on device arrays with CUDA events after a warm-up "
        "launch"
    )
    checks = [
        Check(
            "returned ratio at most 2x the measured",
            "transpose_naive",
            "strided_copy",
            ratio / 2,
            below=False,
        ),
        Check(
            "returned ratio at least half the measured",
            "transpose_naive",
            "strided_copy",
            ratio * 2,
        ),
    ]
    device, _ = device_of(course)
    judged = judge([copy, naive], checks, device, test="test_coalescing_slowdown_gpu")
    measured = judged.verdicts[0].ratio.median
    for verdict in judged.verdicts:
        assert verdict.passed, (
            f"coalescing_slowdown({n}) returned {ratio:.2f}, but timing your transpose_naive "
            f"against your stride-1 strided_copy gives {measured:.2f}; the two must agree within "
            f"a factor of 2. {describe(verdict)}"
        )
