# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # S5.1 The GPU mental model
#
# Before you read a Triton kernel, a FlashAttention paper or a profiler trace, you need a picture
# of what the hardware is doing. This session builds that picture in four steps:
#
# | § | idea | you write |
# |---|---|---|
# | 1 | a GPU trades single-thread speed for throughput | |
# | 2 | memory is a hierarchy, and the bottom of it is slow | |
# | 3 | arithmetic intensity and the roofline | `ridge_point`, `attainable_flops`, `is_memory_bound` |
# | 4 | SIMT: threads, warps, blocks, a grid | `launch_config` |
# | 5 | occupancy: how a GPU hides latency | |
# | 6 | your first kernel | `vector_add`, `gpu_vector_add`, `effective_bandwidth_gbs` |
# | 7 | coalesced memory access | `sectors_per_warp`, `strided_copy`, `coalescing_slowdown` |
# | 8 | what this explains about LLMs: FlashAttention, batch-1 decode, MFU | |
#
# **How to work.** Fill in every cell that says `YOUR CODE HERE`, then run the self-check cell
# right after it. The self-checks are public and quick; the grader runs more tests, with inputs
# it draws at grading time, so make your functions correct in general rather than just for the
# numbers you see here.
#
# **No GPU? No problem.** On a laptop, or a Colab runtime without a GPU, the notebook switches to
# Numba's CUDA *simulator*: your kernels run as ordinary Python, one Python thread per CUDA thread.
# Results are exact, speed is not (about 150 µs per simulated thread), so the demos use small sizes
# there and their timings mean nothing. On Colab choose *Runtime → Change runtime type → T4 GPU* to
# run the kernels for real.
#
# Cells tagged `demo` (plots, timings, full-size runs) are for you to look at; the grader skips them.

# %% nbgrader={"grade": false, "grade_id": "colab_install", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Colab ships Numba without its CUDA target package; install it there (and only there).
# The CUDA 13 wheels need an NVIDIA driver >= 580; older drivers get the CUDA 12 wheels.
import subprocess
import sys

if "google.colab" in sys.modules:
    _smi = subprocess.run(
        ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    )
    _driver = _smi.stdout.strip().split(".")[0] if _smi.returncode == 0 else ""
    _extra = "cu13" if _driver.isdigit() and int(_driver) >= 580 else "cu12"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", f"numba-cuda[{_extra}]==0.30.4"],
        check=True,
    )

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Setup. Decide GPU or simulator BEFORE numba is imported: Numba reads NUMBA_ENABLE_CUDASIM once,
# at import time. GRADER_DEVICE=cpu|gpu overrides the detection.
import math
import os
import shutil
import time

import numpy as np


def _gpu_present() -> bool:
    forced = os.environ.get("GRADER_DEVICE", "").strip().lower()
    if forced in ("cpu", "gpu"):
        return forced == "gpu"
    return os.path.exists("/dev/nvidia0") or shutil.which("nvidia-smi") is not None


if not _gpu_present():
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

from numba import config as numba_config
from numba import cuda

ON_GPU = not numba_config.ENABLE_CUDASIM and cuda.is_available()

# Demo sizes: full size on a GPU, small in the simulator (about 150 us per simulated thread).
VEC_N = 2**24 if ON_GPU else 2048  # elements in the vector-add demo
STRIDE_N = 2**24 if ON_GPU else 1024  # elements in the strided-copy demo
TRANSPOSE_N = 8192 if ON_GPU else 256  # side of the square matrix in the transpose demo

if ON_GPU:
    print(f"GPU: {cuda.get_current_device().name} -- kernels run for real")
elif numba_config.ENABLE_CUDASIM:
    print("No CUDA GPU -- kernels run in Numba's CUDA simulator (exact, but slow).")
else:
    print("A GPU was expected but CUDA is not usable: kernels compile but cannot be launched.")

# %% nbgrader={"grade": false, "grade_id": "helpers", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Two small helpers you may use. `_require_positive` turns a bad argument into an error message
# that says what was wrong and what was expected; `expect_raises` is for the self-checks.


def _require_positive(name, value, unit):
    """Return `value` as a float; raise if it is not a positive, finite number of `unit`."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number of {unit}, got {value!r}") from None
    if not (number > 0 and math.isfinite(number)):
        raise ValueError(f"{name} must be a positive, finite number of {unit}, got {value!r}")
    return number


def expect_raises(exc_type, fn, *args, **kwargs):
    """Self-check helper: fail unless fn(*args, **kwargs) raises exc_type."""
    try:
        fn(*args, **kwargs)
    except exc_type:
        return
    shown = ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])
    raise AssertionError(f"{fn.__name__}({shown}) should raise {exc_type.__name__}")


# %% [markdown]
# ## §1 Latency machines and throughput machines
#
# A CPU core is built to finish *one* instruction stream as soon as possible. Much of its silicon
# goes to making a single thread fast: out-of-order execution, branch predictors, deep pipelines and
# large private caches. A GPU spends that silicon on more arithmetic units and on the state for
# thousands of threads held in flight at once. Its unit of replication is the *streaming
# multiprocessor* (SM). Any one GPU thread is slow. The chip is fast because so many of them run
# at once.
#
# Rough figures for a server CPU and NVIDIA's H100 SXM:
#
# | | server CPU (AMD EPYC 9654) | NVIDIA H100 SXM |
# |---|---|---|
# | cores / SMs | 96 cores | 132 SMs |
# | threads resident at once | about 192 (2 per core) | about 270,000 (2,048 per SM) |
# | peak FP32 | about 5 TFLOP/s | 67 TFLOP/s |
# | peak BF16 on tensor cores | (none) | 989 TFLOP/s |
# | memory bandwidth | about 460 GB/s (DDR5) | 3,350 GB/s (HBM3) |
#
# The GPU reads memory about 7× faster and does BF16 maths roughly 200× faster. Those numbers are
# only reachable when a program offers tens of thousands of independent pieces of work *and*
# touches memory in a pattern the hardware likes. Most of this session is about that second part.

# %% [markdown]
# ## §2 The memory hierarchy
#
# How fast a kernel runs usually depends less on how much arithmetic it does than on *where its
# data lives*. Each level of the hierarchy is larger and slower than the one above it. H100
# figures, approximate:
#
# | level | capacity | bandwidth | latency | visible to |
# |---|---|---|---|---|
# | registers | 256 KB per SM | ~20 TB/s effective | ~1 cycle | one thread |
# | shared memory (on-chip SRAM) | up to 228 KB per SM | ~19 TB/s | ~30 cycles | one block |
# | L2 cache | 50 MB | ~5.5 TB/s | ~200 cycles | whole GPU |
# | HBM (global memory) | 80 GB | 3.35 TB/s | ~500 cycles | whole GPU |
#
# Three consequences run through the rest of the course:
#
# * Almost all the capacity is in HBM, the slowest level on the device. Model weights, activations
#   and the KV cache all live there.
# * Shared memory is fast but tiny: a few megabytes across the chip in total. Fast kernels copy a
#   *tile* of data into it once and reuse that tile many times before going back to HBM.
# * A kernel that moves twice as many bytes through HBM as it needs to will, if memory is its
#   bottleneck, take about twice as long. The bytes you avoid moving are often worth more than
#   the FLOPs you avoid doing.
#
# The plot puts the levels on log-log axes (whole-chip capacity for the per-SM levels). The links
# to a peer GPU and to the host are included for scale.

# %% tags=["demo"]
import matplotlib.pyplot as plt

# (name, whole-device capacity in bytes, bandwidth in bytes/s); H100 SXM, approximate.
KIB, GB = 1024, 1e9
hierarchy = [
    ("registers (132 SMs x 256 KiB)", 132 * 256 * KIB, 20e12),
    ("shared memory (132 SMs x 228 KiB)", 132 * 228 * KIB, 19e12),
    ("L2 cache", 50e6, 5.5e12),
    ("HBM3", 80 * GB, 3.35e12),
    ("NVLink to a peer GPU", 80 * GB, 0.9e12),
    ("PCIe Gen5 to host RAM", 1000 * GB, 64e9),
]
fig, ax = plt.subplots(figsize=(8, 5))
for (name, capacity, bandwidth), dy in zip(hierarchy, (10, -16, 8, 8, -16, 8), strict=True):
    ax.scatter(capacity, bandwidth, s=120, edgecolor="black", zorder=3)
    ax.annotate(name, (capacity, bandwidth), xytext=(8, dy), textcoords="offset points")
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlim(1e7, 1e13)
ax.set_ylim(3e10, 6e13)
ax.set_xlabel("capacity (bytes, log scale)")
ax.set_ylabel("bandwidth (bytes/s, log scale)")
ax.set_title("H100 SXM memory hierarchy: the big levels are the slow ones")
ax.grid(True, which="both", alpha=0.3)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## §3 Arithmetic intensity and the roofline
#
# Every kernel has to do two things: arithmetic, and moving its operands between HBM and the
# chip. The ratio of the two is its **arithmetic intensity**:
#
# $$ I = \frac{\text{FLOPs performed}}{\text{bytes moved to or from HBM}} \quad [\text{FLOP/byte}] $$
#
# A GPU with peak compute $P$ (FLOP/s) and peak bandwidth $B$ (byte/s) can feed a kernel of
# intensity $I$ with at most $I \cdot B$ FLOP/s, and can never exceed $P$. The **roofline model**
# (Williams, Waterman and Patterson, 2009) is just the smaller of the two:
#
# $$ \text{attainable}(I) = \min(I \cdot B,\ P) $$
#
# The two limits meet at the **ridge point** $I^* = P / B$. A kernel to the left of the ridge is
# *memory-bound*: a faster ALU would not help it, only fewer bytes would. A kernel to the right is
# *compute-bound*. For an H100 running BF16 on its tensor cores:
#
# $$ I^* = \frac{989 \times 10^{12}\ \text{FLOP/s}}{3.35 \times 10^{12}\ \text{byte/s}} \approx 295\ \text{FLOP/byte} $$
#
# So a kernel has to do about 295 floating-point operations for every byte it reads or writes
# before the tensor cores, rather than HBM, become the limit. Very few kernels manage that.
#
# **Exercise.** Write `ridge_point`. Units: FLOP/s and byte/s in, FLOP/byte out. A peak that is
# zero, negative or not a number is a mistake in the caller's input: raise `ValueError` with a
# message that says which argument was wrong and what was expected (the `_require_positive`
# helper above does exactly that).


# %% nbgrader={"grade": false, "grade_id": "ridge_point", "locked": false, "schema_version": 3, "solution": true, "task": false}
def ridge_point(peak_flops, peak_bandwidth):
    """Arithmetic intensity (FLOP/byte) at which the roofline bends: peak_flops / peak_bandwidth.

    peak_flops is in FLOP/s and peak_bandwidth in byte/s; both must be positive and finite
    (ValueError otherwise). Returns a Python float.
    """
    ### BEGIN SOLUTION
    flops = _require_positive("peak_flops", peak_flops, "FLOP/s")
    bandwidth = _require_positive("peak_bandwidth", peak_bandwidth, "byte/s")
    return flops / bandwidth
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_ridge_point", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
assert abs(ridge_point(989e12, 3.35e12) - 295.2) < 0.1, (
    "H100 SXM BF16 ridge should be ~295 FLOP/byte"
)
assert abs(ridge_point(65e12, 320e9) - 203.1) < 0.1, "T4 FP16 tensor ridge should be ~203 FLOP/byte"
assert isinstance(ridge_point(1e12, 1e12), float)
expect_raises(ValueError, ridge_point, 0, 3.35e12)
expect_raises(ValueError, ridge_point, 989e12, -1.0)
print("ridge_point: self-checks passed")

# %% [markdown]
# **Exercise.** Write `attainable_flops`, the roofline itself. It must accept a single intensity
# (return a Python `float`) and also a NumPy array of intensities (return an array of the same
# shape, computed without a Python loop: `np.minimum` is your friend). That lets you draw the whole
# roofline with one call. A negative intensity has no meaning: raise `ValueError`.


# %% nbgrader={"grade": false, "grade_id": "attainable_flops", "locked": false, "schema_version": 3, "solution": true, "task": false}
def attainable_flops(intensity, peak_flops, peak_bandwidth):
    """Roofline: min(intensity * peak_bandwidth, peak_flops), in FLOP/s.

    intensity is in FLOP/byte: a scalar (returns a float) or a numpy array (returns a float64
    array of the same shape). Negative or NaN intensity -> ValueError; non-positive peaks ->
    ValueError. An infinite intensity attains peak_flops.
    """
    ### BEGIN SOLUTION
    flops = _require_positive("peak_flops", peak_flops, "FLOP/s")
    bandwidth = _require_positive("peak_bandwidth", peak_bandwidth, "byte/s")
    try:
        values = np.asarray(intensity, dtype=np.float64)
    except (TypeError, ValueError):  # grader: public
        raise TypeError(
            f"intensity must be a number or an array of numbers (FLOP/byte), got {intensity!r}"
        ) from None
    if np.isnan(values).any():
        raise ValueError("intensity must be a number of FLOP/byte, got NaN")
    if (values < 0).any():
        raise ValueError(
            f"intensity must be >= 0 FLOP/byte, got a negative value ({values.min()!r})"
        )
    result = np.minimum(values * bandwidth, flops)
    if isinstance(intensity, (np.ndarray, list, tuple)):
        return result
    return float(result)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_attainable_flops", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_peak, _bw = 989e12, 3.35e12
assert isinstance(attainable_flops(1.0, _peak, _bw), float)
assert abs(attainable_flops(1.0, _peak, _bw) - 3.35e12) < 1e3, (
    "at 1 FLOP/byte you get 1 x bandwidth"
)
assert attainable_flops(1e4, _peak, _bw) == _peak, "far right of the ridge you get the peak"
_grid = np.array([[0.0, 10.0], [295.2, 1000.0]])
_roof = attainable_flops(_grid, _peak, _bw)
assert isinstance(_roof, np.ndarray) and _roof.shape == (2, 2)
assert np.allclose(_roof, [[0.0, 33.5e12], [_peak, _peak]], rtol=1e-3)
expect_raises(ValueError, attainable_flops, -0.5, _peak, _bw)
expect_raises(ValueError, attainable_flops, np.array([1.0, -1.0]), _peak, _bw)
expect_raises(ValueError, attainable_flops, 1.0, 0.0, _bw)
print("attainable_flops: self-checks passed")

# %% [markdown]
# **Exercise.** Write `is_memory_bound`: `True` when the intensity lies *strictly* left of the
# ridge. Exactly at the ridge both limits are equal; call that compute-bound. Return a plain Python
# `bool` (not `numpy.bool_`).


# %% nbgrader={"grade": false, "grade_id": "is_memory_bound", "locked": false, "schema_version": 3, "solution": true, "task": false}
def is_memory_bound(intensity, peak_flops, peak_bandwidth):
    """True when intensity (FLOP/byte, a scalar) is strictly below the ridge point.

    At the ridge itself the answer is False. Negative or NaN intensity -> ValueError;
    non-positive peaks -> ValueError. Returns a Python bool.
    """
    ### BEGIN SOLUTION
    ridge = ridge_point(peak_flops, peak_bandwidth)
    try:
        value = float(intensity)
    except (TypeError, ValueError):
        raise TypeError(f"intensity must be one number of FLOP/byte, got {intensity!r}") from None
    if math.isnan(value) or value < 0:
        raise ValueError(f"intensity must be a number >= 0 FLOP/byte, got {intensity!r}")
    return bool(value < ridge)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_is_memory_bound", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
assert is_memory_bound(1.0, 989e12, 3.35e12) is True, "decode at ~1 FLOP/byte is memory-bound"
assert is_memory_bound(1365.0, 989e12, 3.35e12) is False, "a 4096^3 BF16 GEMM is compute-bound"
assert is_memory_bound(ridge_point(989e12, 3.35e12), 989e12, 3.35e12) is False, (
    "at the ridge: not memory-bound"
)
assert is_memory_bound(100.0, 8.1e12, 320e9) is False, "T4 FP32 ridge is only ~25 FLOP/byte"
expect_raises(ValueError, is_memory_bound, -1.0, 989e12, 3.35e12)
expect_raises(ValueError, is_memory_bound, 1.0, 989e12, 0)
print("is_memory_bound: self-checks passed")

# %% [markdown]
# ### The roofline with real LLM operations on it
#
# The intensities below are computed from byte counts, not measured. For a BF16 GEMM that
# multiplies an $m \times k$ matrix by a $k \times n$ one, the kernel does $2mnk$ FLOPs and, at
# best, reads both inputs and writes the output once: $2(mk + kn + mn)$ bytes.
#
# * **elementwise add** (BF16): 1 FLOP per element against 6 bytes (two reads, one write).
# * **softmax**: about 5 FLOPs per element (max, subtract, exp, sum, divide) against 4 bytes.
# * **attention scores** $QK^\top$ written out to HBM (sequence 4096, head dim 128): the
#   $n \times n$ output matrix dominates the bytes.
# * **decode matvec** at batch 1: every BF16 weight (2 bytes) is read for one multiply-add
#   (2 FLOPs), so about 1 FLOP/byte.
# * **GEMMs**: a prefill-sized one (512 tokens through a 4096×4096 layer) and a square 4096³ one.
#
# The plot is drawn with *your* `attainable_flops`, for the H100 and for Colab's T4.

# %% tags=["demo"]
import matplotlib.pyplot as plt

H100_BF16, H100_HBM = 989e12, 3.35e12
T4_FP16, T4_GDDR6 = 65e12, 320e9


def gemm_intensity(m, n, k, dtype_bytes=2):
    """FLOP/byte of an (m x k) @ (k x n) GEMM that touches each operand once."""
    return 2 * m * n * k / (dtype_bytes * (m * k + k * n + m * n))


seq, head_dim = 4096, 128
llm_ops = [  # (label, FLOP/byte, label offset in points)
    ("elementwise add", 1 / 6, (6, -12)),
    ("decode matvec (batch 1)", 1.0, (8, -14)),
    ("softmax", 5 / 4, (-20, 10)),
    ("attention scores to HBM", gemm_intensity(seq, seq, head_dim), (8, -12)),
    ("GEMM 512x4096x4096", gemm_intensity(512, 4096, 4096), (-60, 10)),
    ("GEMM 4096^3", gemm_intensity(4096, 4096, 4096), (-10, -16)),
]

intensities = np.logspace(-1.5, 4, 400)
fig, ax = plt.subplots(figsize=(9, 5.5))
ax.loglog(
    intensities,
    attainable_flops(intensities, H100_BF16, H100_HBM) / 1e12,
    "k-",
    lw=2,
    label="H100 SXM (BF16 tensor, HBM3)",
)
ax.loglog(
    intensities,
    attainable_flops(intensities, T4_FP16, T4_GDDR6) / 1e12,
    "--",
    color="tab:purple",
    lw=1.5,
    label="T4 (FP16 tensor, GDDR6)",
)
ridge = ridge_point(H100_BF16, H100_HBM)
ax.axvline(ridge, color="gray", ls=":", alpha=0.7)
ax.text(ridge * 1.1, 0.08, f"H100 ridge ~ {ridge:.0f} FLOP/byte", color="gray")
print(f"{'operation':28s} {'FLOP/byte':>10s} {'H100 TFLOP/s':>13s}  bound by")
for label, intensity, offset in llm_ops:
    tflops = attainable_flops(intensity, H100_BF16, H100_HBM) / 1e12
    bound = "memory" if is_memory_bound(intensity, H100_BF16, H100_HBM) else "compute"
    print(f"{label:28s} {intensity:10.2f} {tflops:13.1f}  {bound}")
    ax.scatter(intensity, tflops, s=60, zorder=3)
    ax.annotate(label, (intensity, tflops), xytext=offset, textcoords="offset points", fontsize=9)
ax.set_xlabel("arithmetic intensity (FLOP/byte)")
ax.set_ylabel("attainable performance (TFLOP/s)")
ax.set_title("Roofline: most LLM operations sit left of the ridge")
ax.set_ylim(0.05, 3000)
ax.grid(True, which="both", alpha=0.3)
ax.legend(loc="upper left")
fig.tight_layout()
plt.show()

# %% [markdown]
# Only the big GEMMs clear the ridge. Everything else is memory-bound, which is why inference
# engines *fuse* chains of elementwise operations (residual add, RMSNorm, activation) into one kernel
# that reads its inputs once, and why the batch-1 decode point sits at about 0.3% of the H100's
# peak, however good the matvec kernel is.

# %% [markdown]
# ## §4 SIMT: threads, warps, blocks and a grid
#
# CUDA is **SIMT**: single instruction, multiple threads. You write the program of *one* thread,
# and the hardware runs it for many threads at once:
#
# ```
# grid   all the blocks of one kernel launch, covering the whole problem
#  └─ block   up to 1,024 threads placed together on one SM; they can share memory and synchronise
#      └─ warp    32 threads that issue the same instruction together
#          └─ thread  one lane, with its own registers and its own index
# ```
#
# * The **warp** is the real unit of execution. All 32 lanes run the same instruction. When lanes
#   take different sides of an `if`, the warp runs both sides one after the other with the inactive
#   lanes masked off (*warp divergence*).
# * A **block** lives on a single SM for its whole life. Its threads can cooperate through shared
#   memory and barriers (`cuda.syncthreads()`). Threads in *different* blocks cannot synchronise
#   inside a kernel.
# * The **grid** is as many blocks as the problem needs. The hardware hands blocks to SMs as they
#   become free, so one kernel runs on a 40-SM T4 or a 132-SM H100 without changes.
#
# A launch written `kernel[blocks, threads_per_block](...)` in Numba (`<<<blocks, threads>>>` in
# CUDA C++) starts `blocks × threads_per_block` threads. Each thread finds its global position
# with `cuda.grid(1)`, which is `blockIdx.x * blockDim.x + threadIdx.x`.
#
# **Exercise.** Write `launch_config(n, threads_per_block=256)`: the smallest number of blocks
# whose threads cover `n` elements, i.e. $\lceil n / \text{tpb} \rceil$. Use integer arithmetic
# (a float `math.ceil(n / tpb)` goes wrong for very large `n`). Because the last block may be only
# partly needed, every kernel launched this way needs a bounds check. Reject `n < 1` and a block
# size outside 1..1024 (CUDA's limit) with `ValueError`. Block sizes that are multiples of 32 fill
# their warps; 128 to 512 is the usual range.


# %% nbgrader={"grade": false, "grade_id": "launch_config", "locked": false, "schema_version": 3, "solution": true, "task": false}
def launch_config(n, threads_per_block=256):
    """(blocks, threads_per_block) for a 1-D launch covering n elements; both Python ints.

    blocks = ceil(n / threads_per_block). n must be an integer >= 1 and threads_per_block an
    integer in 1..1024 (ValueError otherwise; TypeError for non-integers).
    """
    ### BEGIN SOLUTION
    for name, value in (("n", n), ("threads_per_block", threads_per_block)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    n, threads_per_block = int(n), int(threads_per_block)
    if n < 1:
        raise ValueError(f"n must be at least 1 element, got {n}")
    if not 1 <= threads_per_block <= 1024:
        raise ValueError(
            f"threads_per_block must be between 1 and 1024 (CUDA's limit per block), "
            f"got {threads_per_block}"
        )
    blocks = (n + threads_per_block - 1) // threads_per_block
    return blocks, threads_per_block
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_launch_config", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
assert launch_config(1000) == (4, 256)
assert launch_config(1024, 256) == (4, 256)
assert launch_config(1025, 256) == (5, 256)
assert launch_config(1, 1024) == (1, 1024)
assert launch_config(2**24) == (65536, 256), (
    "16M elements at 256 threads per block -> 65,536 blocks"
)
_blocks, _tpb = launch_config(10**6, 128)
assert type(_blocks) is int and type(_tpb) is int
expect_raises(ValueError, launch_config, 0)
expect_raises(ValueError, launch_config, 100, 0)
expect_raises(ValueError, launch_config, 100, 2048)
print("launch_config: self-checks passed")

# %% [markdown]
# ## §5 Occupancy: how a GPU hides latency
#
# A load from HBM takes roughly 500 cycles to come back. A GPU does not try to make that wait
# shorter. It makes sure the SM has something else to do while it lasts: when one warp stalls on
# a load, the warp scheduler issues an instruction from another warp that is ready, and switching
# costs nothing because every resident warp keeps its registers on the SM the whole time.
#
# **Occupancy** is resident warps per SM divided by the maximum (64 warps = 2,048 threads on an
# H100). It matters because of Little's law: to keep a memory system busy, *bytes in flight =
# bandwidth × latency*. At 3.35 TB/s and about 500 cycles at 1.98 GHz (≈ 250 ns), the H100 needs
# roughly 850 KB of loads outstanding at any moment, which is about 6.4 KB per SM. A warp loading one
# 4-byte value per thread has 128 bytes in flight, so an SM needs about 50 such warps busy just to
# saturate HBM. With too few warps resident, the bandwidth is unused.
#
# What limits occupancy is whichever per-SM resource runs out first:
#
# * **registers**: an H100 SM has 65,536 32-bit registers. At 2,048 threads that is 32 registers
#   per thread. A kernel that needs 64 can keep at most 1,024 threads resident (50% occupancy).
# * **shared memory**: a block that asks for 100 KB of shared memory allows at most two blocks per
#   SM.
# * **block size and block count**: tiny blocks hit the per-SM block limit; a grid with fewer
#   blocks than SMs leaves whole SMs idle.
#
# Higher occupancy is not always faster. A GEMM kernel often deliberately uses many registers per
# thread so it can reuse data held in registers, and makes up for the lower occupancy with
# instruction-level parallelism. Use occupancy to explain a slow kernel after profiling it, not as
# a number to push to 100%. Two rules of thumb: launch at least a few blocks per SM, and for
# memory-bound kernels make sure each SM has plenty of warps waiting on memory.

# %% [markdown]
# ## §6 Your first kernel: vector add
#
# Adding two vectors is the "hello world" of GPU programming. Thread `i` reads `a[i]` and `b[i]` and
# writes `c[i]`. There is 1 FLOP for every 12 bytes of FP32 traffic (an intensity of 0.08), so the
# kernel is as memory-bound as a kernel can be, and how fast it runs depends only on how close it
# gets to the GPU's bandwidth.
#
# **Exercise.** Write the body of `vector_add`, a Numba `@cuda.jit` kernel:
#
# 1. get this thread's global index with `cuda.grid(1)`;
# 2. **bounds check**: `if i < c.size:`. The grid is rounded up to whole blocks, so some threads of
#    the last block have no element;
# 3. store `a[i] + b[i]` into `c[i]`. Kernels cannot return values; they write into arrays.
#
# Forget the bounds check and the extra threads write past the end of `c`. In the simulator that
# raises `IndexError`. On a real GPU it may silently corrupt a neighbouring buffer, or kill the whole
# CUDA context with an "illegal address" error. The self-check below launches more threads than
# elements on purpose.


# %% nbgrader={"grade": false, "grade_id": "vector_add", "locked": false, "schema_version": 3, "solution": true, "task": false}
@cuda.jit
def vector_add(a, b, c):
    """Kernel: c[i] = a[i] + b[i], one element per thread (1-D arrays of equal size).

    Launch with at least c.size threads; threads whose index is >= c.size do nothing.
    """
    ### BEGIN SOLUTION
    i = cuda.grid(1)
    if i < c.size:
        c[i] = a[i] + b[i]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_vector_add", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_rng = np.random.default_rng(0)
_a = _rng.standard_normal(1000).astype(np.float32)
_b = _rng.standard_normal(1000).astype(np.float32)
_c = np.zeros_like(_a)
vector_add[4, 256](_a, _b, _c)  # 1,024 threads for 1,000 elements: the bounds check matters
np.testing.assert_allclose(_c, _a + _b, rtol=1e-6)
print("vector_add: self-checks passed")

# %% [markdown]
# A kernel only runs the GPU side. The host (CPU) code around it has to move data across PCIe into
# HBM, launch the kernel, and copy the result back.
#
# **Exercise.** Write `gpu_vector_add(a, b, threads_per_block=256)`:
#
# * check that `a` and `b` have the same shape (`ValueError` naming both shapes otherwise);
# * copy the inputs to the device with `cuda.to_device`, and allocate the output there with
#   `cuda.device_array` (with the inputs' dtype);
# * launch `vector_add` with your `launch_config`, then bring the result back with
#   `.copy_to_host()`.
#
# The kernel indexes 1-D arrays, so flatten multi-dimensional inputs (`np.ascontiguousarray(x).ravel()`)
# and reshape the result. The output has the inputs' dtype (NumPy's common dtype if they differ),
# and an empty input gives an empty output.


# %% nbgrader={"grade": false, "grade_id": "gpu_vector_add", "locked": false, "schema_version": 3, "solution": true, "task": false}
def gpu_vector_add(a, b, threads_per_block=256):
    """Host wrapper: a + b computed by `vector_add` on the device; returns a numpy array.

    a and b must have the same shape (ValueError otherwise); any shape works (flattened for the
    launch, reshaped after). The result has the inputs' dtype (their common dtype if they differ).
    Empty inputs give an empty result without a launch.
    """
    ### BEGIN SOLUTION
    a = np.asarray(a)
    b = np.asarray(b)
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same shape, got {a.shape} and {b.shape}")
    dtype = np.result_type(a.dtype, b.dtype)
    if dtype.kind not in "biufc":
        raise TypeError(f"a and b must hold numbers, got dtype {dtype}")
    if a.size == 0:
        return np.empty(a.shape, dtype=dtype)
    d_a = cuda.to_device(np.ascontiguousarray(a, dtype=dtype).ravel())
    d_b = cuda.to_device(np.ascontiguousarray(b, dtype=dtype).ravel())
    d_c = cuda.device_array(a.size, dtype=dtype)
    blocks, threads = launch_config(a.size, threads_per_block)
    vector_add[blocks, threads](d_a, d_b, d_c)
    return d_c.copy_to_host().reshape(a.shape)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_gpu_vector_add", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_x = np.arange(700, dtype=np.float32)
_y = np.full(700, 0.5, dtype=np.float32)
_z = gpu_vector_add(_x, _y, threads_per_block=128)
assert isinstance(_z, np.ndarray) and _z.dtype == np.float32 and _z.shape == (700,)
np.testing.assert_allclose(_z, _x + _y)
assert gpu_vector_add(np.ones(5), np.ones(5)).dtype == np.float64, "output keeps the input dtype"
expect_raises(ValueError, gpu_vector_add, np.ones(4), np.ones(5))
print("gpu_vector_add: self-checks passed")

# %% [markdown]
# How good is a memory-bound kernel? Compare the bytes it *had* to move with the time it took:
#
# $$ \text{effective bandwidth} = \frac{\text{bytes moved}}{\text{elapsed time}} $$
#
# For vector add on $n$ FP32 elements, that is $3 \times 4n$ bytes (two reads, one write). Compare
# the result with the GPU's peak: a good streaming kernel reaches 70 to 90% of it. The H100 can
# move the 201 MB of a 16M-element FP32 add in about 60 µs.
#
# **Exercise.** Write `effective_bandwidth_gbs(bytes_moved, elapsed_ms)`. Mind the units: time in
# **milliseconds**, result in **GB/s with 1 GB = 10⁹ bytes** (the unit GPU datasheets use). A
# non-positive time or negative byte count is an error.


# %% nbgrader={"grade": false, "grade_id": "effective_bandwidth_gbs", "locked": false, "schema_version": 3, "solution": true, "task": false}
def effective_bandwidth_gbs(bytes_moved, elapsed_ms):
    """Effective bandwidth in GB/s (1 GB = 1e9 bytes) of moving bytes_moved in elapsed_ms.

    bytes_moved must be >= 0 and finite; elapsed_ms (milliseconds) must be > 0 and finite
    (ValueError otherwise). Returns a Python float.
    """
    ### BEGIN SOLUTION
    try:
        nbytes = float(bytes_moved)
    except (TypeError, ValueError):
        raise TypeError(f"bytes_moved must be a number of bytes, got {bytes_moved!r}") from None
    if not (nbytes >= 0 and math.isfinite(nbytes)):
        raise ValueError(f"bytes_moved must be a finite number of bytes >= 0, got {bytes_moved!r}")
    milliseconds = _require_positive("elapsed_ms", elapsed_ms, "milliseconds")
    return nbytes / (milliseconds * 1e-3) / 1e9
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_effective_bandwidth_gbs", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
assert abs(effective_bandwidth_gbs(1e9, 1000.0) - 1.0) < 1e-12, "1e9 bytes in one second is 1 GB/s"
assert abs(effective_bandwidth_gbs(12e6, 1.0) - 12.0) < 1e-9
_bytes = 3 * 4 * 2**24  # FP32 vector add of 16M elements
assert abs(effective_bandwidth_gbs(_bytes, 0.06) - 3355.4) < 0.1
assert effective_bandwidth_gbs(0, 1.0) == 0.0
expect_raises(ValueError, effective_bandwidth_gbs, 1e6, 0.0)
expect_raises(ValueError, effective_bandwidth_gbs, -1, 1.0)
print("effective_bandwidth_gbs: self-checks passed")

# %% [markdown]
# ### Demo: time your vector add
#
# On a GPU this runs 16M elements, times 50 launches with CUDA events (timestamps recorded on the
# GPU, so host-side overhead does not count), and compares your kernel with PyTorch's own `a + b`
# on the same arrays. In the simulator it checks correctness on a small vector and the timings are
# meaningless.

# %% tags=["demo"]
_rng = np.random.default_rng(1)
a_host = _rng.standard_normal(VEC_N).astype(np.float32)
b_host = _rng.standard_normal(VEC_N).astype(np.float32)
blocks, tpb = launch_config(VEC_N)
print(f"{VEC_N:,} elements -> {blocks:,} blocks x {tpb} threads = {blocks * tpb // 32:,} warps")
np.testing.assert_allclose(gpu_vector_add(a_host, b_host), a_host + b_host, rtol=1e-6)
bytes_moved = 3 * a_host.nbytes

if ON_GPU:
    import torch

    d_a, d_b = cuda.to_device(a_host), cuda.to_device(b_host)
    d_c = cuda.device_array_like(d_a)
    vector_add[blocks, tpb](d_a, d_b, d_c)  # warm-up (includes compilation)
    cuda.synchronize()
    start, end = cuda.event(), cuda.event()
    repeats = 50
    start.record()
    for _ in range(repeats):
        vector_add[blocks, tpb](d_a, d_b, d_c)
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end) / repeats

    t_a, t_b = torch.from_numpy(a_host).cuda(), torch.from_numpy(b_host).cuda()
    t_c = torch.empty_like(t_a)
    torch.add(t_a, t_b, out=t_c)
    t_start = torch.cuda.Event(enable_timing=True)
    t_end = torch.cuda.Event(enable_timing=True)
    t_start.record()
    for _ in range(repeats):
        torch.add(t_a, t_b, out=t_c)
    t_end.record()
    torch.cuda.synchronize()
    torch_ms = t_start.elapsed_time(t_end) / repeats

    print(f"your vector_add : {ms:7.3f} ms -> {effective_bandwidth_gbs(bytes_moved, ms):7.1f} GB/s")
    print(
        f"torch a + b     : {torch_ms:7.3f} ms -> {effective_bandwidth_gbs(bytes_moved, torch_ms):7.1f} GB/s"
    )
else:
    t0 = time.perf_counter()
    gpu_vector_add(a_host, b_host)
    ms = (time.perf_counter() - t0) * 1e3
    print(f"simulated: {ms:.0f} ms, i.e. {effective_bandwidth_gbs(bytes_moved, ms):.6f} GB/s.")
    print("Simulator timings mean nothing: every CUDA thread is a Python thread here.")

# %% [markdown]
# ## §7 Coalesced memory access
#
# DRAM is not read one float at a time. The memory system moves aligned **32-byte sectors** (four
# of them make a 128-byte cache line). When a warp executes a load, the hardware collects the 32
# addresses and fetches every sector that at least one lane needs:
#
# ```
# coalesced  lane 0 -> byte 0,  lane 1 -> byte 4,   ..., lane 31 -> byte 124     4 sectors, all bytes used
# strided    lane 0 -> byte 0,  lane 1 -> byte 128, ..., lane 31 -> byte 3968   32 sectors, 4 of 32 bytes used
# ```
#
# Both loads bring in the same 128 *useful* bytes, but the strided one drags 1,024 bytes across
# the bus: an 8× loss of bandwidth before any arithmetic happens. This is why **layout matters as
# much as the algorithm**. Reading a row-major matrix down its columns, or a KV cache stored in an
# order that does not match how decode reads it, wastes most of every sector. (PagedAttention,
# Kwon et al. 2023, deliberately splits the KV cache into fixed-size pages: a little contiguity is
# given up in exchange for far less wasted memory.)
#
# **Exercise.** Write `sectors_per_warp(stride, itemsize=4, warp_size=32, sector_bytes=32)`: lane
# `l` reads byte address `l * stride * itemsize` (the warp starts on a sector boundary); return how
# many *distinct* sectors those addresses fall in. Stride 0 (every lane reads the same element) is
# one sector. A negative stride or a non-positive size is a `ValueError`.


# %% nbgrader={"grade": false, "grade_id": "sectors_per_warp", "locked": false, "schema_version": 3, "solution": true, "task": false}
def sectors_per_warp(stride, itemsize=4, warp_size=32, sector_bytes=32):
    """Distinct sector_bytes-sized sectors touched when lane l reads byte l * stride * itemsize.

    stride is in elements (>= 0); itemsize and sector_bytes in bytes, warp_size in lanes (all
    >= 1). The warp's first address is sector-aligned. Returns a Python int (stride 0 -> 1).
    """
    ### BEGIN SOLUTION
    args = {
        "stride": stride,
        "itemsize": itemsize,
        "warp_size": warp_size,
        "sector_bytes": sector_bytes,
    }
    for name, value in args.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    if stride < 0:
        raise ValueError(f"stride must be >= 0 elements, got {stride}")
    for name in ("itemsize", "warp_size", "sector_bytes"):
        if args[name] < 1:
            raise ValueError(f"{name} must be a positive integer, got {args[name]}")
    step = int(stride) * int(itemsize)
    return len({lane * step // int(sector_bytes) for lane in range(int(warp_size))})
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_sectors_per_warp", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
assert sectors_per_warp(1) == 4, "32 consecutive fp32 values = 128 bytes = 4 sectors"
assert sectors_per_warp(32) == 32, "each lane in its own sector"
assert sectors_per_warp(0) == 1, "all lanes read the same element"
assert sectors_per_warp(2) == 8
assert sectors_per_warp(1, itemsize=2) == 2, "32 consecutive fp16 values = 64 bytes"
assert sectors_per_warp(1000) == 32
assert type(sectors_per_warp(1)) is int
expect_raises(ValueError, sectors_per_warp, -1)
expect_raises(ValueError, sectors_per_warp, 1, itemsize=0)
expect_raises(ValueError, sectors_per_warp, 1, sector_bytes=0)
print("sectors_per_warp: self-checks passed")

# %% tags=["demo"]
import matplotlib.pyplot as plt

strides = [0, 1, 2, 4, 8, 16, 32, 64]
fp32 = [sectors_per_warp(s) for s in strides]
fp16 = [sectors_per_warp(s, itemsize=2) for s in strides]
fig, ax = plt.subplots(figsize=(7, 4))
ax.plot(strides[1:], fp32[1:], "o-", label="fp32")
ax.plot(strides[1:], fp16[1:], "s--", label="fp16")
ax.set_xscale("log", base=2)
ax.set_xlabel("stride between lanes (elements)")
ax.set_ylabel("32-byte sectors per warp load")
ax.set_title("Sectors fetched per warp: the useful data is always 32 elements")
ax.grid(True, alpha=0.3)
ax.legend()
fig.tight_layout()
plt.show()
for s, n32 in zip(strides, fp32, strict=True):
    useful = 4 if s == 0 else 128  # stride 0: all 32 lanes share one fp32 value
    print(f"stride {s:3d}: {n32:2d} sectors, {n32 * 32:5d} bytes fetched for {useful} useful bytes")

# %% [markdown]
# Now measure it. `strided_copy` makes thread `i` write `dst[i] = src[(i * stride) % n]`, where
# `n = src.size`. The writes stay coalesced; only the reads spread out as the stride grows. The
# modulo wraps the index, so every stride copies the same number of elements and the only thing
# that changes is the pattern.
#
# **Exercise.** Write the body of the `strided_copy` kernel: global index, bounds check against
# `dst.size`, then the strided, wrapped read.


# %% nbgrader={"grade": false, "grade_id": "strided_copy", "locked": false, "schema_version": 3, "solution": true, "task": false}
@cuda.jit
def strided_copy(src, dst, stride):
    """Kernel: dst[i] = src[(i * stride) % src.size] for every i < dst.size (1-D arrays).

    stride is an integer number of elements; one thread per element of dst.
    """
    ### BEGIN SOLUTION
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] = src[(i * stride) % src.size]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_strided_copy", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_src = np.arange(512, dtype=np.float32)
for _stride in (1, 3, 32):
    _dst = np.full(300, -1.0, dtype=np.float32)
    strided_copy[2, 256](_src, _dst, _stride)  # 512 threads for 300 outputs
    np.testing.assert_array_equal(_dst, _src[(np.arange(300) * _stride) % 512])
print("strided_copy: self-checks passed")

# %% [markdown]
# ### Demo: bandwidth against stride
#
# On a GPU this copies 16M FP32 values at each stride and reports the *useful* bandwidth (8 bytes
# per element: one read, one write). As the stride grows, each warp pulls in more sectors for the
# same useful data and the bandwidth drops, until the L2 cache absorbs some of the waste. In the
# simulator it only checks the results.

# %% tags=["demo"]
import matplotlib.pyplot as plt

src = np.arange(STRIDE_N, dtype=np.float32)
blocks, tpb = launch_config(STRIDE_N)
strides = [1, 2, 4, 8, 16, 32]
d_src = cuda.to_device(src)
d_dst = cuda.device_array_like(d_src)
bandwidths = []
for s in strides:
    strided_copy[blocks, tpb](d_src, d_dst, s)  # warm-up, and a correctness check
    expected = src[(np.arange(STRIDE_N) * s) % STRIDE_N]
    np.testing.assert_array_equal(d_dst.copy_to_host(), expected)
    if ON_GPU:
        start, end = cuda.event(), cuda.event()
        start.record()
        for _ in range(20):
            strided_copy[blocks, tpb](d_src, d_dst, s)
        end.record()
        end.synchronize()
        ms = start.elapsed_time(end) / 20
        bandwidths.append(effective_bandwidth_gbs(2 * src.nbytes, ms))
        print(
            f"stride {s:2d}: {sectors_per_warp(s):2d} sectors/warp, {ms:6.3f} ms, "
            f"{bandwidths[-1]:7.1f} GB/s useful"
        )

if ON_GPU:
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(strides, bandwidths, "o-")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("read stride (elements)")
    ax.set_ylabel("useful bandwidth (GB/s)")
    ax.set_title(f"strided_copy on {cuda.get_current_device().name}")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    plt.show()
else:
    print(f"strided_copy correct for strides {strides} on {STRIDE_N:,} elements (simulator).")
    print("Simulator timings mean nothing, so none are shown; run on a GPU to see the cliff.")

# %% [markdown]
# ### The same effect in PyTorch: transposing copies
#
# You rarely write a copy kernel by hand, but you meet the same effect in PyTorch all the time.
# `x.clone()` reads and writes an $n \times n$ matrix in order. `x.t().contiguous()` writes the
# same bytes in order but has to *read* them down the columns, with a stride of $n$ elements. Same
# bytes, same FLOPs (none), different access pattern. A transpose kernel that does not stage tiles
# through shared memory to turn the column reads into row reads hits this wall.
#
# **Exercise.** Write `coalescing_slowdown(n=8192)`, which returns the time of `x.t().contiguous()`
# divided by the time of `x.clone()` for one `n × n` float32 tensor `x` on the best available torch
# device (`"cuda"` if `torch.cuda.is_available()`, else `"cpu"`). Measure carefully:
#
# * import `torch` inside the function (importing it takes seconds, so only pay when needed);
# * warm up each operation before timing it (the first call allocates memory and picks kernels);
# * take several timings of each and use the **median**, which ignores the odd slow outlier;
# * on CUDA, launches are asynchronous: time with `torch.cuda.Event(enable_timing=True)` and
#   synchronise before reading the clock. On the CPU use `time.perf_counter()`;
# * for small `n` a single copy takes microseconds, so time a loop of several copies per sample.
#
# `n < 1` is a `ValueError`.


# %% nbgrader={"grade": false, "grade_id": "coalescing_slowdown", "locked": false, "schema_version": 3, "solution": true, "task": false}
def coalescing_slowdown(n=8192):
    """Median time of x.t().contiguous() over median time of x.clone(), x an n x n float32 tensor.

    Runs on CUDA when torch sees a GPU, else on the CPU; warms up, times several samples (CUDA
    events on the GPU, time.perf_counter on the CPU) and returns their ratio as a float (> 1 means
    the strided read is slower). n must be an integer >= 1 (ValueError otherwise).
    """
    ### BEGIN SOLUTION
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"n must be an integer matrix side, got {n!r} ({type(n).__name__})")
    if n < 1:
        raise ValueError(f"n must be at least 1 (the side of an n x n matrix), got {n}")
    import torch

    n = int(n)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.rand(n, n, dtype=torch.float32, device=device)
    # Enough copies per sample that one sample lasts well above the clock's resolution.
    inner = max(1, min(1000, 2**22 // (n * n)))
    samples, warmup = 7, 2

    def median_ms(op):
        for _ in range(warmup):
            op()
        times = []
        for _ in range(samples):
            if device == "cuda":
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()  # grader: public
                start.record()  # grader: public
                for _ in range(inner):
                    op()
                end.record()  # grader: public
                end.synchronize()  # grader: public
                times.append(start.elapsed_time(end))
            else:
                t0 = time.perf_counter()  # grader: public
                for _ in range(inner):
                    op()
                times.append((time.perf_counter() - t0) * 1e3)
        return float(np.median(times))

    contiguous_ms = median_ms(lambda: x.clone())
    strided_ms = median_ms(lambda: x.t().contiguous())
    return strided_ms / max(contiguous_ms, 1e-9)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_coalescing_slowdown", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_ratio = coalescing_slowdown(64)
assert isinstance(_ratio, float) and math.isfinite(_ratio) and _ratio > 0
expect_raises(ValueError, coalescing_slowdown, 0)
print(f"coalescing_slowdown: self-checks passed (n=64 ratio {_ratio:.2f}, too small to mean much)")

# %% tags=["demo"]
ratio = coalescing_slowdown(TRANSPOSE_N)
where = "GPU" if ON_GPU else "CPU (torch runs for real here, so this measures CPU caches)"
print(f"n={TRANSPOSE_N}: x.t().contiguous() takes {ratio:.1f}x as long as x.clone() on the {where}")

# %% [markdown]
# ## §8 What this explains about LLMs
#
# **Why FlashAttention is faster even though it does more arithmetic.** Standard attention writes
# the $n \times n$ score matrix to HBM, reads it back for the softmax, writes the probabilities, and
# reads them again to multiply by $V$. All of that is $O(n^2)$ HBM traffic for operations that sit
# far left of the ridge. FlashAttention cuts $Q$, $K$ and $V$ into tiles small enough for shared
# memory, keeps a running ("online") softmax as it walks along the keys, and never writes the score
# matrix to HBM. It does somewhat more arithmetic (the backward pass recomputes scores instead of
# storing them) but moves far fewer bytes, and on a memory-bound operation fewer bytes means less
# time.
#
# **Why batch-1 decode is bandwidth-bound, whatever the kernel.** Generating one token for one
# sequence multiplies every weight matrix by a single vector. Each BF16 weight (2 bytes) comes
# out of HBM to take part in one multiply-add (2 FLOPs): about 1 FLOP/byte, against a ridge of
# about 295. The roofline then caps the H100 at about 3.35 TFLOP/s, roughly 0.3% of its BF16 peak,
# and no kernel, however clever, gets past that, because the bytes have to be read. What helps is
# changing the ratio: **batching** (one read of the weights serves many sequences), **speculative
# decoding** (check several tokens per read), and **quantisation** (fewer bytes per weight). You
# will place your own model's decode on the T4 roofline in milestone M9 (session S5.2).
#
# **What an MFU of 45% means.** Model FLOPs utilisation is the FLOP/s the model's maths actually
# achieved divided by the hardware's peak. The rest goes to memory-bound operations (everything but
# the big GEMMs), kernel launch gaps, less than full occupancy, communication between GPUs, waiting
# for data, and work the tensor cores cannot do (softmax, FP32 reductions). Well-tuned large
# training runs reach about 40 to 60% MFU; that is what good looks like, and 100% is not a
# realistic target.

# %% [markdown]
# ## Done?
#
# Re-run the whole notebook (*Runtime → Restart and run all*) and check that every self-check
# prints `passed`. Then commit and open your pull request; the grader runs the public and hidden
# tests on your functions, in the simulator and, where a GPU runner is available, on real hardware.
