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
# of what the hardware is doing. This session builds it in the eleven sections below:
#
# | § | idea | you write |
# |---|---|---|
# | 1 | a GPU trades single-thread speed for throughput | |
# | 2 | memory is a hierarchy, and the bottom of it is slow | |
# | 3 | arithmetic intensity and the roofline | `ridge_point`, `attainable_flops`, `is_memory_bound` |
# | 4 | SIMT: threads, warps, blocks, a grid; divergence | `launch_config`, `divergence_efficiency` |
# | 5 | occupancy: how a GPU hides latency | `occupancy` |
# | 6 | your first kernel | `vector_add`, `gpu_vector_add`, `effective_bandwidth_gbs` |
# | 7 | coalesced memory access | `sectors_per_warp`, `strided_copy` |
# | 8 | shared memory: a tiled transpose | `transpose_naive`, `transpose_tiled`, `coalescing_slowdown` |
# | 9 | shared memory that raises intensity: a tiled matrix multiply | `tiled_intensity`, `matmul_naive`, `matmul_tiled` |
# | 10 | measure it: your kernels on the T4's roofline | |
# | 11 | what this explains about LLMs: FlashAttention, batch-1 decode, MFU | |
#
# **How to work.** Fill in every cell that says `YOUR CODE HERE`, then run the self-check cell
# right after it. The self-checks are public and quick; the grader runs more tests, with inputs
# it draws at grading time, so make your functions correct in general rather than just for the
# numbers you see here.
#
# **Rules the grader holds you to** (each exercise repeats the ones that apply to it):
#
# **Errors: one convention, in both of this chapter's notebooks.**
#
# * An argument of the wrong *type* raises `TypeError`: a string where a number belongs; a float
#   where an integer (a count) is required, `2.0` included; a `bool` (Python's, or NumPy's
#   `numpy.bool_`) where a number belongs; anything but a dict where a dict belongs. An integer
#   may be a Python `int` or a NumPy integer.
# * A value of the right type that is out of range raises `ValueError`: zero, negative, NaN,
#   infinite, too large; and a dict (a model config, a `gpu` or `sm` dict) that lacks a key it
#   needs, or, for a model config, holds a key it does not allow.
# * When a call has several faults you may raise for any of them, with one exception: a number of
#   the wrong type is a `TypeError` even when it is also out of range (`-2.0` where a count
#   belongs). The grader's bad calls have one fault each, apart from that case, so the order of
#   your checks never costs a point.
# * The message names the argument and says what was expected.
# * Four cases settled once: where a `bool` belongs (a config's `tied_embeddings`), only Python's
#   `True` or `False` will do, and a `numpy.bool_` is a `TypeError`, as `1` is; where a function
#   takes an array of numbers (`attainable_flops`' `intensity`), a list or a tuple of numbers is
#   one too, and the result is a NumPy array of its shape; a figure that may be fractional (a
#   bandwidth, a peak, `memory_bytes` in a `gpu` dict) may be an `int` or a float, `16e9`
#   included, while a count (`sm_count`, `memory_mib`, every limit in an `sm` dict) must be an
#   `int`, and `40.0` is not one; every limit in an `sm` dict is positive except
#   `reserved_shared_memory_per_block`, which may be 0 (the T4 reserves none), so a zero limit
#   anywhere else is a `ValueError` naming its key.
#
# And for the rest:
#
# * Return types are the plain Python ones each docstring names (`float`, `int`, `bool`, `tuple`),
#   not NumPy scalars.
# * Every kernel must also compile for the course GPU, the T4 (compute capability 7.5): the
#   grader compiles it to PTX, and a kernel that does not compile earns no kernel points even if
#   the simulator ran it. A kernel is a plain `@cuda.jit` function at the top level of its cell;
#   inside it use its arguments, numbers, array indexing, `cuda.*`, `math`, `numba` and `numpy`
#   (types and functions that Numba compiles), your own `@cuda.jit(device=True)` helpers, and
#   module-level number constants such as `TILE` (§6 says more).
# * Kernels are graded on sizes that are not multiples of the block or tile size, on several
#   blocks, and on float32 arrays unless the exercise says otherwise.
# * How your kernels meet memory (sectors per warp request, bank conflicts, bytes moved) is
#   graded from the grader's memory model, the same on a laptop and on a GPU runner (§7). A GPU
#   runner also times some of them at full size; each timed test states its threshold where its
#   exercise is. The grader times each kernel itself: samples of several launches, taking turns
#   with the kernel it is compared with, until their spread is small, and compares the medians.
#   Every timed launch reads an input of its own (two different inputs take turns) and writes
#   into an output that was filled with NaN, and every output is checked afterwards: a kernel
#   earns timing points only when each timed launch computes the whole, correct result and
#   leaves its inputs unchanged. A result within the measurement's spread of its threshold is
#   measured once more and then decided by the medians, and the feedback says so.
#
# **No GPU? No problem.** On a laptop, or a Colab runtime without a GPU, the notebook switches to
# Numba's CUDA *simulator*: your kernels run as ordinary Python, one simulated CUDA thread at a
# time. Results are exact, speed is not (tens of µs per simulated thread), so the demos use small
# sizes there and their timings mean nothing. On Colab choose *Runtime → Change runtime type → T4 GPU* to
# run the kernels for real.
#
# Cells tagged `demo` (plots, timings, full-size runs) are for you to look at; the grader skips them.

# %% nbgrader={"grade": false, "grade_id": "colab_install", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Install cell. On Colab it installs only what the runtime lacks: Numba's CUDA target
# (numba-cuda), in the build that matches the CUDA version the NVIDIA driver says it runs
# (CUDA 12 for drivers 525-579, CUDA 13 for 580 and newer); on a CPU runtime the plain package,
# for the simulator. Elsewhere (your laptop, the grader) it installs nothing: the course's
# install profile already brought numba-cuda.
def _colab_install(numba_cuda="0.30.4"):
    import importlib.util
    import re
    import shutil
    import subprocess
    import sys
    from importlib import metadata

    if "google.colab" not in sys.modules:
        print("Not on Colab: using the packages already installed (nothing to do).")
        return
    gpu = None  # (name, driver version, CUDA major the driver runs)
    smi = shutil.which("nvidia-smi")
    if smi is not None:
        try:
            out = subprocess.run([smi, "-q"], capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        pattern = r"^\s*(Product Name|Driver Version|CUDA Version)\s*:\s*(\S.*?)\s*$"
        found = dict(re.findall(pattern, out, re.M))
        major = found.get("CUDA Version", "").split(".")[0]
        if major.isdigit():
            gpu = (found.get("Product Name", "GPU"), found.get("Driver Version", "?"), int(major))
    have = 0  # CUDA major of the installed numba-cuda's bindings; 0: numba-cuda absent
    if importlib.util.find_spec("numba_cuda") is not None:
        try:
            have = int(metadata.version("cuda-bindings").split(".")[0])
        except (metadata.PackageNotFoundError, ValueError):
            have = -1
    if gpu is not None and gpu[2] >= 12:
        build = min(gpu[2], 13)
        want = f"numba-cuda[cu{build}]=={numba_cuda}"
        why = f"{gpu[0]}, driver {gpu[1]} runs CUDA {gpu[2]}: the CUDA {build} build"
        enough = have == build
    else:
        want = f"numba-cuda=={numba_cuda}"
        why = "no NVIDIA driver (CPU runtime)" if gpu is None else f"driver {gpu[1]}: CUDA < 12"
        why += ": kernels run in the CUDA simulator"
        enough = have != 0
    if enough:
        print(f"Colab: {why}; numba-cuda is already installed, nothing to do.")
        return
    print(f"Colab: {why}; installing {want} ...")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", want], check=True)
    importlib.invalidate_caches()
    if "numba.cuda" in sys.modules:
        print("numba.cuda was imported before this install: Runtime > Restart session, run on.")
    else:  # what numba-cuda's .pth file does at start-up: route `numba.cuda` to numba-cuda
        import _numba_cuda_redirector  # noqa: F401


_colab_install()

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Setup. Decide GPU or simulator BEFORE numba is imported: Numba reads NUMBA_ENABLE_CUDASIM once,
# at import time. GRADER_DEVICE=cpu|gpu overrides the detection.
import math
import numbers
import os
import shutil
import time

import numpy as np

try:
    import tomllib  # Python 3.11+
except ModuleNotFoundError:  # pragma: no cover - older Pythons
    import tomli as tomllib

# The [hardware] tables of course.toml, written into this cell by `grader release`, so that the
# notebook works opened on its own (Colab straight from GitHub, no clone). A course.toml found
# at or above the working directory is read instead.
COURSE_HARDWARE = {}


def _gpu_present() -> bool:
    forced = os.environ.get("GRADER_DEVICE", "").strip().lower()
    if forced in ("cpu", "gpu"):
        return forced == "gpu"
    return os.path.exists("/dev/nvidia0") or shutil.which("nvidia-smi") is not None


if not _gpu_present():
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

# %% nbgrader={"grade": false, "grade_id": "numba_setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Numba, imported now that the cell above has chosen the GPU or the simulator.
import numba
from numba import config as numba_config
from numba import cuda

ON_GPU = not numba_config.ENABLE_CUDASIM and cuda.is_available()

if ON_GPU:
    print(f"GPU: {cuda.get_current_device().name} -- kernels run for real")
elif numba_config.ENABLE_CUDASIM:
    print("No CUDA GPU -- kernels run in Numba's CUDA simulator (exact, but slow).")
else:
    print("A GPU was expected but CUDA is not usable: kernels compile but cannot be launched.")

# %% tags=["demo"]
# Demo sizes: full size on a GPU, small in the simulator (about 150 us per simulated thread).
VEC_N = 2**24 if ON_GPU else 2048  # elements in the vector-add demo
STRIDE_N = 2**24 if ON_GPU else 1024  # elements in the strided-copy demo
TRANSPOSE_N = 8192 if ON_GPU else 48  # side of the square matrix in the transpose demo

# %% nbgrader={"grade": false, "grade_id": "helpers", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Helpers you may use. `_require_positive` turns a bad argument into an error message that says
# what was wrong and what was expected; `expect_raises`, `expect_written`, `peak_figures` and
# `sm_limits` serve the self-checks and demos (the last two read course.toml).


def _require_positive(name, value, unit):
    """Return `value` as a float: TypeError if it is not a number, ValueError unless it is > 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number of {unit}, got {value!r}")
    number = float(value)
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


def expect_written(name, out):
    """Self-check helper: `out` was filled with NaN before the launch; all NaN means no writes.

    On a real GPU the stub's `raise NotImplementedError` compiles to a plain return, so an empty
    kernel would otherwise show up as a wall of mismatched elements.
    """
    if np.isnan(out).all():
        raise AssertionError(f"{name} wrote nothing: fill in its body (the YOUR CODE HERE cell)")


def find_course_root(start=None):
    """The nearest folder at or above `start` (default: the cwd) holding course.toml, or None."""
    here = os.path.abspath(start or os.getcwd())
    while True:
        if os.path.isfile(os.path.join(here, "course.toml")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def _hardware_table(gpu):
    """The [hardware.<gpu>] table of course.toml (found by walking up from the cwd), or the
    copy the release wrote into the setup cell when the notebook is opened alone."""
    root = find_course_root()
    if root is None and gpu in COURSE_HARDWARE:  # opened alone: the release's copy
        return COURSE_HARDWARE[gpu]
    if root is None:
        raise FileNotFoundError(
            "course.toml not found here or above: open this notebook from a checkout of the "
            "course repository (on Colab, clone your fork and %cd into this notebook's folder "
            "under exercises/)"
        )
    with open(os.path.join(root, "course.toml"), "rb") as fh:
        return tomllib.load(fh)["hardware"][gpu]


def peak_figures(gpu):
    """(peak FP16/BF16 tensor FLOP/s, peak memory byte/s) of `gpu` from course.toml."""
    table = _hardware_table(gpu)
    return table["fp16_tensor_tflops"] * 1e12, table["bandwidth_gbs"] * 1e9


def sm_limits(gpu):
    """Per-SM limits of `gpu` (a [hardware.<gpu>] key of course.toml, e.g. "T4") as a dict.

    The dict `occupancy` takes: every key of [hardware.<gpu>.sm] (the thirteen listed in §5),
    with shared memory per SM as shared_memory_bytes. The figures live in course.toml only.
    """
    limits = _hardware_table(gpu)["sm"]
    out = {k: int(v) for k, v in limits.items() if k != "shared_memory_kib"}
    out["shared_memory_bytes"] = int(limits["shared_memory_kib"]) * 1024
    return out


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
# A server CPU next to NVIDIA's H100 SXM. The CPU column is worked out from its data sheet, so you
# can check it: 96 Zen 4 cores, each with two 256-bit FMA pipes (2 pipes x 8 FP32 lanes x 2 FLOPs
# = 32 FP32 FLOPs per clock), at the 2.4 GHz base clock; twelve DDR5-4800 channels of 8 bytes.
#
# | | server CPU (AMD EPYC 9654) | NVIDIA H100 SXM |
# |---|---|---|
# | cores / SMs | 96 cores | 132 SMs |
# | threads resident at once | 192 (2 per core) | 270,336 (2,048 per SM) |
# | peak FP32 | 96 x 32 x 2.4e9 ≈ 7.4 TFLOP/s | 67 TFLOP/s |
# | peak BF16 on tensor cores | (no tensor cores) | 989 TFLOP/s |
# | memory bandwidth | 12 x 4.8e9 x 8 B ≈ 461 GB/s (DDR5) | 3,350 GB/s (HBM3) |
#
# Like for like, the GPU reads memory about 7× faster and does FP32 arithmetic about 9× faster.
# Its larger lead, 989 TFLOP/s of BF16 matrix maths, comes from tensor cores, units a CPU core
# does not have. Either figure is reached only by a program with tens of thousands of independent
# pieces of work *and* memory accesses laid out the way the hardware wants them. Most of this
# session is about that second condition.

# %% [markdown]
# ## §2 The memory hierarchy
#
# How fast a kernel runs usually depends less on how much arithmetic it does than on *where its
# data lives*. Each level of the hierarchy is larger and slower than the one above it. H100
# figures, approximate:
#
# | level | capacity | bandwidth (whole chip) | latency | visible to |
# |---|---|---|---|---|
# | registers | 256 KB per SM (34 MB in all) | ~400 TB/s | ~1 cycle | one thread |
# | shared memory (on-chip SRAM) | up to 228 KB per SM (30 MB in all) | ~33 TB/s | ~30 cycles | one block |
# | L2 cache | 50 MB | ~5.5 TB/s | ~200 cycles | whole GPU |
# | HBM (global memory) | 80 GiB (nvidia-smi: 81,559 MiB) | 3.35 TB/s | ~500 cycles | whole GPU |
#
# The on-chip bandwidths follow from the clock (1.98 GHz boost) and what each SM moves per clock.
# Shared memory: 132 SMs x 128 bytes per clock x 1.98 GHz ≈ 33 TB/s. Registers: each SM's four
# schedulers can each issue one instruction per clock for 32 lanes, reading up to three 4-byte
# operands, 1,536 bytes per clock per SM, so 132 x 1,536 x 1.98 GHz ≈ 400 TB/s.
#
# Three consequences run through the rest of the course:
#
# * Almost all the capacity is in HBM, the slowest level on the device. Model weights, activations
#   and the KV cache all live there.
# * Shared memory is fast but small: about 30 MB across the whole H100 (132 x 228 KB), and only
#   2.6 MB on the T4 (40 SMs x 64 KB), against 80 GiB of HBM. (Memory sizes are binary: the
#   "80 GB" of an H100 is 80 GiB, 2^30 bytes each, of which nvidia-smi reports 81,559 MiB to
#   programs; bandwidths and FLOP/s are decimal, 1e9 and 1e12 a second. `course.toml` keeps each
#   card's memory as nvidia-smi reports it, `memory_mib`.) Fast kernels copy a *tile* of data
#   into it once and reuse that tile many times before going back to HBM (§8 builds one).
# * A kernel that moves twice as many bytes through HBM as it needs to will, if memory is its
#   bottleneck, take about twice as long. The bytes you avoid moving are often worth more than
#   the FLOPs you avoid doing.
#
# The plot puts the levels on log-log axes (whole-chip capacity for the per-SM levels). The links
# to a peer GPU and to the host are included for scale, both counted in one direction (NVLink 4's
# often-quoted 900 GB/s is the two directions added together).

# %% tags=["demo"]
import matplotlib.pyplot as plt

# (name, whole-device capacity in bytes, bandwidth in bytes/s); H100 SXM, approximate.
KIB, GB = 1024, 1e9
CLOCK_HZ, SMS = 1.98e9, 132
HBM_BYTES = _hardware_table("H100_SXM")["memory_mib"] * 2**20  # nvidia-smi's MiB, from course.toml
hierarchy = [  # (label, capacity, bandwidth, label offset in points)
    ("registers (132 x 256 KiB)", SMS * 256 * KIB, SMS * 1536 * CLOCK_HZ, (10, -4)),
    ("shared memory (132 x 228 KiB)", SMS * 228 * KIB, SMS * 128 * CLOCK_HZ, (10, -4)),
    ("L2 cache", 50e6, 5.5e12, (10, -4)),
    ("HBM3", HBM_BYTES, 3.35e12, (10, -4)),
    ("NVLink 4 to a peer GPU (one direction)", HBM_BYTES, 450e9, (-40, 12)),
    ("PCIe Gen5 x16 to host RAM (one direction)", 1000 * GB, 64e9, (-200, 12)),
]
fig, ax = plt.subplots(figsize=(9.5, 5.5))
for name, capacity, bandwidth, offset in hierarchy:
    ax.scatter(capacity, bandwidth, s=120, edgecolor="black", zorder=3)
    ax.annotate(name, (capacity, bandwidth), xytext=offset, textcoords="offset points")
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlim(1e7, 1e14)
ax.set_ylim(3e10, 2e15)
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
# **Exercise.** Write `ridge_point`. Units: FLOP/s and byte/s in, FLOP/byte out, returned as a
# Python `float`. A peak that is zero, negative, infinite or NaN is a mistake in the caller's
# input: raise `ValueError` with a message that says which argument was wrong and what was
# expected; a peak that is not a number at all (say the string `"989e12"`) raises `TypeError`.
# The `_require_positive` helper above does both.


# %% nbgrader={"grade": false, "grade_id": "ridge_point", "locked": false, "schema_version": 3, "solution": true, "task": false}
def ridge_point(peak_flops, peak_bandwidth):
    """Arithmetic intensity (FLOP/byte) at which the roofline bends: peak_flops / peak_bandwidth.

    peak_flops is in FLOP/s and peak_bandwidth in byte/s; both must be positive and finite
    (ValueError otherwise; TypeError if one is not a number). Returns a Python float.
    """
    ### BEGIN SOLUTION
    flops = _require_positive("peak_flops", peak_flops, "FLOP/s")
    bandwidth = _require_positive("peak_bandwidth", peak_bandwidth, "byte/s")
    return flops / bandwidth
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_ridge_point", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
def _check_ridge_point():
    assert abs(ridge_point(989e12, 3.35e12) - 295.2) < 0.1, (
        "H100 SXM BF16 ridge should be ~295 FLOP/byte"
    )
    assert abs(ridge_point(65e12, 320e9) - 203.1) < 0.1, (
        "T4 FP16 tensor ridge should be ~203 FLOP/byte"
    )
    assert isinstance(ridge_point(1e12, 1e12), float), "ridge_point must return a Python float"
    expect_raises(ValueError, ridge_point, 0, 3.35e12)
    expect_raises(ValueError, ridge_point, 989e12, -1.0)


_check_ridge_point()
del _check_ridge_point
print("ridge_point: self-checks passed")


# %% [markdown]
# **Exercise.** Write `attainable_flops`, the roofline itself. It must accept a single intensity
# (return a Python `float`) and also a NumPy array of intensities (return an array of the same
# shape, computed without a Python loop: `np.minimum` is your friend). That lets you draw the whole
# roofline with one call. A negative or NaN intensity has no meaning: raise `ValueError`, also
# when only one element of an array is bad. Peaks follow `ridge_point`'s rules. An intensity that
# is not a number raises `TypeError`.


# %% nbgrader={"grade": false, "grade_id": "attainable_flops", "locked": false, "schema_version": 3, "solution": true, "task": false}
def attainable_flops(intensity, peak_flops, peak_bandwidth):
    """Roofline: min(intensity * peak_bandwidth, peak_flops), in FLOP/s.

    intensity is in FLOP/byte: a scalar (returns a float) or an array of numbers, a numpy array,
    a list or a tuple (returns a float64 numpy array of the same shape). Negative or NaN intensity -> ValueError; non-positive peaks ->
    ValueError; non-numbers -> TypeError. An infinite intensity attains peak_flops.
    """
    ### BEGIN SOLUTION
    flops = _require_positive("peak_flops", peak_flops, "FLOP/s")
    bandwidth = _require_positive("peak_bandwidth", peak_bandwidth, "byte/s")
    values = np.asarray(intensity)
    if values.dtype.kind not in "iuf" or isinstance(intensity, bool):
        raise TypeError(
            f"intensity must be a number or an array of numbers (FLOP/byte), got {intensity!r}"
        )
    values = values.astype(np.float64)
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
def _check_attainable_flops():
    _peak, _bw = 989e12, 3.35e12
    assert isinstance(attainable_flops(1.0, _peak, _bw), float), "a scalar in gives a float out"
    assert abs(attainable_flops(1.0, _peak, _bw) - 3.35e12) < 1e3, (
        "at 1 FLOP/byte you get 1 x bandwidth"
    )
    assert attainable_flops(1e4, _peak, _bw) == _peak, "far right of the ridge you get the peak"
    _grid = np.array([[0.0, 10.0], [295.2, 1000.0]])
    _roof = attainable_flops(_grid, _peak, _bw)
    assert isinstance(_roof, np.ndarray) and _roof.shape == (2, 2), "an array in gives an array out"
    assert np.allclose(_roof, [[0.0, 33.5e12], [_peak, _peak]], rtol=1e-3), (
        f"elementwise min(intensity * bandwidth, peak) expected, got {_roof}"
    )
    expect_raises(ValueError, attainable_flops, -0.5, _peak, _bw)
    expect_raises(ValueError, attainable_flops, np.array([1.0, -1.0]), _peak, _bw)
    expect_raises(ValueError, attainable_flops, 1.0, 0.0, _bw)


_check_attainable_flops()
del _check_attainable_flops
print("attainable_flops: self-checks passed")


# %% [markdown]
# **Exercise.** Write `is_memory_bound`: `True` when the intensity lies *strictly* left of the
# ridge. Exactly at the ridge both limits are equal; call that compute-bound. Return a plain Python
# `bool` (not `numpy.bool_`). The intensity is one number; bad intensities and peaks raise as in
# `attainable_flops`. Compare the intensity with the ridge as `ridge_point` computes it,
# `intensity < peak_flops / peak_bandwidth`, not the rearranged `intensity * peak_bandwidth <
# peak_flops`: the two round differently, and at the ridge itself the product form is wrong for
# about one pair of peaks in twenty (`989e12 / 3.35e12 * 3.35e12` is `988999999999999.9`, a hair
# under the peak, so the H100's own ridge would come out memory-bound; the self-check below
# tries exactly that). Floating point has the same trap in M9's `crossover_batch`.


# %% nbgrader={"grade": false, "grade_id": "is_memory_bound", "locked": false, "schema_version": 3, "solution": true, "task": false}
def is_memory_bound(intensity, peak_flops, peak_bandwidth):
    """True when intensity (FLOP/byte, a scalar) is strictly below the ridge point.

    At the ridge itself the answer is False. Negative or NaN intensity -> ValueError;
    non-positive peaks -> ValueError; non-numbers -> TypeError. Returns a Python bool.
    """
    ### BEGIN SOLUTION
    ridge = ridge_point(peak_flops, peak_bandwidth)
    if isinstance(intensity, bool) or not isinstance(intensity, numbers.Real):
        raise TypeError(f"intensity must be one number of FLOP/byte, got {intensity!r}")
    value = float(intensity)
    if math.isnan(value) or value < 0:
        raise ValueError(f"intensity must be a number >= 0 FLOP/byte, got {intensity!r}")
    return bool(value < ridge)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_is_memory_bound", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
def _check_is_memory_bound():
    assert is_memory_bound(1.0, 989e12, 3.35e12) is True, "decode at ~1 FLOP/byte is memory-bound"
    assert is_memory_bound(1365.0, 989e12, 3.35e12) is False, "a 4096^3 BF16 GEMM is compute-bound"
    assert is_memory_bound(ridge_point(989e12, 3.35e12), 989e12, 3.35e12) is False, (
        "at the ridge: not memory-bound"
    )
    assert is_memory_bound(100.0, 8.1e12, 320e9) is False, "T4 FP32 ridge is only ~25 FLOP/byte"
    expect_raises(ValueError, is_memory_bound, -1.0, 989e12, 3.35e12)
    expect_raises(ValueError, is_memory_bound, 1.0, 989e12, 0)
    expect_raises(TypeError, is_memory_bound, "1.0", 989e12, 3.35e12)


_check_is_memory_bound()
del _check_is_memory_bound
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

H100_BF16, H100_HBM = peak_figures("H100_SXM")  # from course.toml
T4_FP16, T4_GDDR6 = peak_figures("T4")


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
fig, ax = plt.subplots(figsize=(9.5, 5.5))
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
t4_ridge = ridge_point(T4_FP16, T4_GDDR6)
ax.axvline(ridge, color="gray", ls=":", alpha=0.7)
ax.text(ridge * 1.1, 0.08, f"H100 ridge ~ {ridge:.0f} FLOP/byte", color="gray")
ax.axvline(t4_ridge, color="tab:purple", ls=":", alpha=0.7)
ax.text(t4_ridge / 1.1, 0.16, f"T4 ridge ~ {t4_ridge:.0f}", color="tab:purple", ha="right")
print(f"{'operation':28s} {'FLOP/byte':>10s} {'H100 TFLOP/s':>13s} {'T4 TFLOP/s':>11s}  bound by")
for i, (label, intensity, offset) in enumerate(llm_ops):
    tflops = attainable_flops(intensity, H100_BF16, H100_HBM) / 1e12
    t4_tflops = attainable_flops(intensity, T4_FP16, T4_GDDR6) / 1e12
    bound = "memory" if is_memory_bound(intensity, H100_BF16, H100_HBM) else "compute"
    t4_bound = "memory" if is_memory_bound(intensity, T4_FP16, T4_GDDR6) else "compute"
    print(f"{label:28s} {intensity:10.2f} {tflops:13.1f} {t4_tflops:11.2f}  {bound} / {t4_bound}")
    color = f"C{i}"
    ax.scatter(intensity, tflops, s=60, color=color, zorder=3)
    ax.scatter(intensity, t4_tflops, s=60, facecolor="none", edgecolor=color, zorder=3)
    ax.annotate(label, (intensity, tflops), xytext=offset, textcoords="offset points", fontsize=8.5)
ax.scatter([], [], s=60, color="gray", label="an operation on the H100 (filled)")
ax.scatter([], [], s=60, facecolor="none", edgecolor="gray", label="the same on the T4 (hollow)")
ax.set_xlabel("arithmetic intensity (FLOP/byte)")
ax.set_ylabel("attainable performance (TFLOP/s)")
ax.set_title("Roofline: most LLM operations sit left of the ridge")
ax.set_ylim(0.05, 3000)
ax.grid(True, which="both", alpha=0.3)
ax.legend(loc="upper left")
fig.tight_layout()
plt.show()

# %% [markdown]
# Each operation appears twice, at the same intensity: filled on the H100's roof, hollow on the
# T4's. The T4's ridge sits further left (65e12 / 320e9 ≈ 203 FLOP/byte, both figures from
# course.toml) and its flat roof is about 15 times lower (989 / 65). Only the big GEMMs clear
# either ridge. Everything else is memory-bound, which is why inference engines *fuse* chains
# of elementwise operations (residual add, RMSNorm, activation) into one kernel that reads its
# inputs once, and why the batch-1 decode point sits at about 0.3% of the H100's peak, however
# good the matvec kernel is.

# %% [markdown]
# ## §4 SIMT: threads, warps, blocks and a grid
#
# CUDA follows the **SIMT** model (single instruction, multiple threads). Your code describes what
# *one* thread does, and the hardware runs that code for many threads at once:
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
#   The lanes of a warp can also pass values to each other directly (a *shuffle*; §6 ends with a
#   kernel that sums with them).
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
# whose threads cover `n` elements, i.e. $\lceil n / \text{tpb} \rceil$. Use integer arithmetic,
# `(n + tpb - 1) // tpb`. The grader checks `n` up to `2**62`, where a float `math.ceil(n /
# tpb)` is off by one (a float holds integers exactly only up to `2**53`: `2**53 + 1` elements
# at 256 per block need `2**45 + 1` blocks, and the float answer is `2**45`). Because the last
# block may be only partly needed, every kernel launched this way needs a bounds check. Return a
# `tuple` of two Python `int`s, `(blocks, threads_per_block)`, ready to unpack into
# `kernel[blocks, tpb]`. Reject `n < 1` and a block size outside 1..1024 (CUDA's limit) with
# `ValueError`, and a non-integer (`2.5`, `"256"`, `True`) with `TypeError`. Block sizes that
# are multiples of 32 fill their warps; 128 to 512 is the usual range.


# %% nbgrader={"grade": false, "grade_id": "launch_config", "locked": false, "schema_version": 3, "solution": true, "task": false}
def launch_config(n, threads_per_block=256):
    """(blocks, threads_per_block) for a 1-D launch covering n elements: a tuple of Python ints.

    blocks = ceil(n / threads_per_block), computed with integers. n must be >= 1 and
    threads_per_block in 1..1024 (ValueError otherwise); non-integers raise TypeError.
    """
    ### BEGIN SOLUTION
    for name, value in (("n", n), ("threads_per_block", threads_per_block)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    n, threads_per_block = int(n), int(threads_per_block)
    if n < 1:  # grader: public
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
def _check_launch_config():
    assert launch_config(1000) == (4, 256), "1000 elements at 256 per block need 4 blocks"
    assert launch_config(1024, 256) == (4, 256), "exactly 4 full blocks"
    assert launch_config(1025, 256) == (5, 256), "one element more needs a fifth block"
    assert launch_config(1, 1024) == (1, 1024), "one element still needs one block"
    assert type(launch_config(10)) is tuple, "return a tuple (blocks, threads_per_block)"
    assert launch_config(2**24) == (65536, 256), (
        "16M elements at 256 threads per block -> 65,536 blocks"
    )
    _blocks, _tpb = launch_config(10**6, 128)
    assert type(_blocks) is int and type(_tpb) is int, "both entries must be Python ints"
    expect_raises(ValueError, launch_config, 0)
    expect_raises(ValueError, launch_config, 100, 0)
    expect_raises(ValueError, launch_config, 100, 2048)
    expect_raises(TypeError, launch_config, 100.0)


_check_launch_config()
del _check_launch_config
print("launch_config: self-checks passed")


# %% [markdown]
# ### Warp divergence
#
# A warp has one program counter for its 32 lanes. When the lanes disagree at an `if`, the warp
# cannot run both sides at once: it runs the `if` side with the other lanes switched off, then the
# `else` side with the first group switched off. Each side costs 32 lane-slots of issue time
# whether 1 lane or 31 lanes need it. (Volta and later GPUs track each thread's progress, which
# changes how threads may synchronise inside a warp, but the two sides still do not execute in the
# same cycle.)
#
# Count the work in lane-slots. Take an `if` and an `else` of equal cost. A warp whose lanes all
# agree runs one side: 32 slots, 32 of them useful. A warp that splits runs both: 64 slots for
# the same 32 useful lane-results, so half the issue slots are wasted, however the 32 lanes split.
# A branch on `threadIdx.x % 2` wastes half of every warp. A branch on `i < n` (the bounds check)
# splits at most one warp of the whole grid. A branch on `threadIdx.x // 32 % 2` costs nothing,
# because it sends whole warps one way or the other.
#
# **Exercise.** Write `divergence_efficiency(branch_taken)`. `branch_taken` is one warp's outcomes
# of an `if`, exactly 32 entries, each `True` (the lane takes the `if` side) or `False`, Python's
# `bool` or NumPy's `numpy.bool_` (what `list(lanes % 2 == 0)` holds): a list, a tuple or a
# NumPy array of dtype `bool`. Return, as a Python `float`, the useful lane-slots
# divided by the lane-slots spent when each side that some lane takes runs once over all 32
# lanes: `1.0` when the lanes agree, `0.5` when they split. A sequence whose length is not 32
# raises `ValueError`; an entry that is not a bool (`1`, `None`, a string) raises `TypeError`.


# %% nbgrader={"grade": false, "grade_id": "divergence_efficiency", "locked": false, "schema_version": 3, "solution": true, "task": false}
def divergence_efficiency(branch_taken):
    """Fraction of one warp's lane-slots doing useful work at an if/else of equal cost.

    branch_taken: 32 bools (list, tuple or bool numpy array), True where a lane takes the `if`
    side. Returns a Python float: 1.0 when all lanes agree, 0.5 when they split. A length other
    than 32 raises ValueError; a non-bool entry raises TypeError.
    """
    ### BEGIN SOLUTION
    if isinstance(branch_taken, np.ndarray):
        if branch_taken.dtype != np.bool_ or branch_taken.ndim != 1:
            raise TypeError(
                f"branch_taken must be a 1-D array of dtype bool, got {branch_taken.dtype} "
                f"with shape {branch_taken.shape}"
            )
        lanes = [bool(v) for v in branch_taken]
    elif isinstance(branch_taken, (list, tuple)):
        for lane, v in enumerate(branch_taken):
            if not isinstance(v, (bool, np.bool_)):
                raise TypeError(f"branch_taken[{lane}] must be a bool, got {v!r}")
        lanes = [bool(v) for v in branch_taken]
    else:
        raise TypeError(
            f"branch_taken must be a list, tuple or bool array, got {type(branch_taken).__name__}"
        )
    if len(lanes) != 32:
        raise ValueError(f"a warp has 32 lanes; branch_taken has {len(lanes)} entries")
    sides_run = len(set(lanes))  # 1 when the warp agrees, 2 when it splits
    return 32 / (32 * sides_run)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_divergence_efficiency", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
def _check_divergence_efficiency():
    _lanes = np.arange(32)
    assert divergence_efficiency([True] * 32) == 1.0, "every lane takes the if: no divergence"
    assert divergence_efficiency([False] * 32) == 1.0, "every lane skips it: no divergence either"
    assert divergence_efficiency(list(_lanes % 2 == 0)) == 0.5, (
        "odd/even lanes split: both sides run"
    )
    assert divergence_efficiency(_lanes == 5) == 0.5, "one lane alone still costs a whole pass"
    assert type(divergence_efficiency(tuple([True] * 32))) is float, "return a Python float"
    expect_raises(ValueError, divergence_efficiency, [True] * 31)
    expect_raises(TypeError, divergence_efficiency, [1] * 32)


_check_divergence_efficiency()
del _check_divergence_efficiency
print("divergence_efficiency: self-checks passed")


# %% tags=["demo"]
# Four branch conditions over the 8 warps of a 256-thread block, warp by warp.
_tid = np.arange(256)
conditions = {
    "tid % 2 == 0": _tid % 2 == 0,
    "tid < 200 (a bounds check)": _tid < 200,
    "(tid // 32) % 2 == 0": (_tid // 32) % 2 == 0,
    "tid % 32 == 0": _tid % 32 == 0,
}
for label, taken in conditions.items():
    per_warp = [divergence_efficiency(taken[w * 32 : (w + 1) * 32]) for w in range(8)]
    print(f"{label:28s} mean efficiency {np.mean(per_warp):.3f}  per warp {per_warp}")

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
# bandwidth × latency*. Which latency matters. The ~500 cycles (≈ 250 ns at 1.98 GHz) of §2 are
# the **unloaded** latency, one load in an idle memory system. A load issued while HBM runs near
# its peak waits in the memory controllers' queues as well, and this **loaded** latency is
# roughly twice as long or more; the course takes about 600 ns for it on every course GPU. The
# unloaded figure gives a floor: even with no queueing the H100 would need 3.35 TB/s x 250 ns
# ≈ 840 KB in flight, 6.3 KB per SM. To actually saturate HBM, use the loaded one: 3.35 TB/s x
# 600 ns ≈ 2 MB, about 15 KB per SM. A warp loading one 4-byte value per thread has 128 bytes in
# flight, so that is about 120 such loads outstanding per SM, more than the 64 warps an SM can
# hold: at full occupancy every warp still needs two or more independent loads in flight. With
# too few warps resident, or warps that wait on one load at a time, the bandwidth is unused (§8
# puts numbers on it).
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
# ### Computing occupancy
#
# The course GPU is the T4, so work the numbers out for it as well as for the H100. The per-SM
# limits of each GPU are kept once, in `course.toml` (`[hardware.T4.sm]`, `[hardware.H100_SXM.sm]`):
#
# | per SM | T4 (cc 7.5) | H100 (cc 9.0) |
# |---|---|---|
# | threads | 1,024 | 2,048 |
# | warps | 32 | 64 |
# | blocks | 16 | 32 |
# | 32-bit registers | 65,536 | 65,536 |
# | shared memory | 64 KB | 228 KB |
# | threads in one block, at most | 1,024 | 1,024 |
# | registers one block may hold | 65,536 | 65,536 |
# | register sub-partitions (warp schedulers) | 4 | 4 |
# | shared memory handed out in units of | 256 B | 128 B |
# | shared memory the runtime adds to each block | 0 B | 1,024 B |
# | shared memory one block may ask for | 65,536 B | 232,448 B (227 KB) |
#
# The helper `sm_limits("T4")` reads them into a dict with the keys `max_threads`, `max_blocks`,
# `max_warps`, `registers`, `shared_memory_bytes`, `register_granularity`,
# `max_threads_per_block`, `max_registers_per_thread`, `max_registers_per_block`,
# `register_sub_partitions`, `shared_memory_granularity`, `reserved_shared_memory_per_block`
# and `max_shared_memory_per_block`.
#
# The rules below are the ones CUDA's own occupancy calculator applies (the header
# `cuda_occupancy.h`, behind `cudaOccupancyMaxActiveBlocksPerMultiprocessor`), for a kernel
# that may use all of the SM's shared memory. Write `wpb = ceil(tpb / 32)` for the warps of one
# block: a partial warp still takes a whole warp. Blocks per SM is the smallest of four limits:
#
# 1. **threads**: a block larger than `max_threads_per_block` (1,024 on every GPU here, even on
#    an H100 whose SM holds 2,048 threads) cannot be launched at all. Otherwise the SM holds
#    `max_warps` warps, so at most `max_warps // wpb` blocks.
# 2. **blocks**: at most `max_blocks`.
# 3. **registers**: a warp is given `32 x registers_per_thread` registers rounded up to a
#    multiple of `register_granularity` (256); call that `per_warp`. The register file is split
#    evenly over `register_sub_partitions` (4) warp schedulers, and each warp lives in one of
#    them, so one sub-partition holds `(registers // 4) // per_warp` warps and the SM four times
#    that: `4 x ((registers // 4) // per_warp) // wpb` blocks. A register left over in one
#    sub-partition cannot serve a warp of another. There is also a limit per block: the
#    hardware checks `per_warp x ceil(wpb / 4) x 4 <= max_registers_per_block` (as if the
#    block's warps were spread evenly over all four sub-partitions), and a block that fails it
#    cannot be launched, even where its registers would fit in the SM in total. Zero registers
#    per thread sets no limit.
# 4. **shared memory**: a block is given `shared_bytes_per_block +
#    reserved_shared_memory_per_block` bytes (the runtime keeps 1 KB of each block's shared
#    memory for itself on an H100, none on a T4), rounded up to a multiple of
#    `shared_memory_granularity`; call that `per_block`. The SM fits `shared_memory_bytes //
#    per_block` blocks. A block may ask for at most `max_shared_memory_per_block` bytes, so the
#    reserve always fits beside it. When `per_block` is 0 (no shared memory on a T4) this sets
#    no limit.
#
# Then `warps_per_sm = blocks_per_sm x wpb` and the occupancy is `warps_per_sm / max_warps`.
# Three worked cases show why the finer rules matter:
#
# * T4, 302 threads with 174 registers: `wpb = 10`, `per_warp = 5,568 -> 5,632`. In total
#   `10 x 5,632 = 56,320` registers would fit in 65,536, but one sub-partition holds only
#   `16,384 // 5,632 = 2` such warps, 8 in the SM, fewer than the block's 10; the per-block
#   check says the same (`ceil(10 / 4) x 4 = 12` warps, `12 x 5,632 = 67,584 > 65,536`), so
#   no such block can run.
# * H100, 96 threads with 40 registers: `per_warp = 1,280`; one sub-partition holds
#   `16,384 // 1,280 = 12` warps, the SM `48`, so `48 // 3 = 16` blocks (dividing the whole
#   register file, `65,536 // 1,280 = 51` warps, would promise 17).
# * H100, 128 threads with 38,397 bytes of shared memory: `38,397 + 1,024 = 39,421`, rounded
#   up to `39,424`; `233,472 // 39,424 = 5` blocks (`233,472 // 38,397` would say 6).
#
# **Exercise.** Write `occupancy(threads_per_block, registers_per_thread, shared_bytes_per_block,
# sm)`. Return a dict with exactly these keys:
#
# * `"blocks_per_sm"` and `"warps_per_sm"`: Python `int`s;
# * `"occupancy"`: a Python `float` between 0 and 1;
# * `"limited_by"`: the limit that sets `blocks_per_sm`, one of `"threads"`, `"blocks"`,
#   `"registers"`, `"shared_memory"`. When several limits give the same smallest count, name the
#   first of them in that order.
#
# Arguments: `threads_per_block` from 1 to `sm["max_threads_per_block"]`,
# `registers_per_thread` from 0 to `sm["max_registers_per_thread"]` (255),
# `shared_bytes_per_block` from 0 to `sm["max_shared_memory_per_block"]`; a value outside its
# range, or a combination that fits no block at all on the SM (a block that fails the
# per-block register check, say 1,024 threads using 255 registers each), raises `ValueError`
# naming the resource. A non-integer argument raises `TypeError`, and so does an `sm` that is
# not a dict; an `sm` dict that lacks one of the thirteen keys above raises `ValueError` (the
# notebook's convention for a dict missing a key it needs), and a value in it that is not an
# integer `TypeError`. A limit in `sm` below 1 raises `ValueError` naming its key, but
# `reserved_shared_memory_per_block`, which may be 0. The grader compares your answers with its own copy
# of CUDA's rules on a thousand launch shapes drawn across the T4 and the H100,
# including the three cases above.


# %% nbgrader={"grade": false, "grade_id": "occupancy", "locked": false, "schema_version": 3, "solution": true, "task": false}
def occupancy(threads_per_block, registers_per_thread, shared_bytes_per_block, sm):
    """Blocks and warps of one kernel resident per SM, the occupancy, and what limits it.

    sm is a per-SM limits dict (see sm_limits). Returns {"blocks_per_sm": int, "warps_per_sm":
    int, "occupancy": float, "limited_by": "threads" | "blocks" | "registers" | "shared_memory"};
    ties go to the first in that order. Out-of-range values, or a block that cannot be launched
    (the per-block register check), or an sm lacking a key, raise ValueError; non-integers and
    an sm that is not a dict raise TypeError.
    """
    ### BEGIN SOLUTION
    keys = (
        "max_threads",
        "max_blocks",
        "max_warps",
        "registers",
        "shared_memory_bytes",
        "register_granularity",
        "max_threads_per_block",
        "max_registers_per_thread",
        "max_registers_per_block",
        "register_sub_partitions",
        "shared_memory_granularity",
        "reserved_shared_memory_per_block",
        "max_shared_memory_per_block",
    )
    if not isinstance(sm, dict):
        raise TypeError(f"sm must be a dict of per-SM limits (see sm_limits), got {sm!r}")
    missing = [k for k in keys if k not in sm]
    if missing:
        raise ValueError(f"sm lacks {', '.join(missing)}: it needs the keys {', '.join(keys)}")
    args = {
        "threads_per_block": threads_per_block,
        "registers_per_thread": registers_per_thread,
        "shared_bytes_per_block": shared_bytes_per_block,
        **{f"sm[{k!r}]": sm[k] for k in keys},
    }
    for name, value in args.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    tpb, regs, smem = int(threads_per_block), int(registers_per_thread), int(shared_bytes_per_block)
    lim = {k: int(sm[k]) for k in keys}
    for k, value in lim.items():
        least = 0 if k == "reserved_shared_memory_per_block" else 1
        if value < least:
            raise ValueError(f"sm[{k!r}] must be at least {least}, got {value}")
    if not 1 <= tpb <= lim["max_threads_per_block"]:
        raise ValueError(
            f"threads_per_block must be between 1 and {lim['max_threads_per_block']} (the most "
            f"threads one block may have), got {tpb}"
        )
    if not 0 <= regs <= lim["max_registers_per_thread"]:
        raise ValueError(
            f"registers_per_thread must be between 0 and {lim['max_registers_per_thread']}, "
            f"got {regs}"
        )
    if not 0 <= smem <= lim["max_shared_memory_per_block"]:
        raise ValueError(
            f"shared_bytes_per_block must be between 0 and {lim['max_shared_memory_per_block']} "
            f"bytes (the most shared memory one block may ask for), got {smem}"
        )
    wpb = -(-tpb // 32)
    candidates = {"threads": lim["max_warps"] // wpb, "blocks": lim["max_blocks"]}
    if regs:
        unit, parts = lim["register_granularity"], lim["register_sub_partitions"]
        per_warp = -(-(32 * regs) // unit) * unit
        if per_warp * (-(-wpb // parts) * parts) > lim["max_registers_per_block"]:
            raise ValueError(
                f"a block of {tpb} threads with {regs} registers per thread cannot be launched: "
                f"{per_warp} registers per warp for {-(-wpb // parts) * parts} warps (its {wpb} "
                f"rounded up to {parts} sub-partitions) exceed the "
                f"{lim['max_registers_per_block']} registers one block may hold"
            )
        warps_per_part = (lim["registers"] // parts) // per_warp
        candidates["registers"] = warps_per_part * parts // wpb
    unit = lim["shared_memory_granularity"]
    per_block = -(-(smem + lim["reserved_shared_memory_per_block"]) // unit) * unit
    if per_block:
        candidates["shared_memory"] = lim["shared_memory_bytes"] // per_block
    blocks = min(candidates.values())
    limited_by = next(k for k, v in candidates.items() if v == blocks)
    if blocks == 0:
        raise ValueError(
            f"a block of {tpb} threads with {regs} registers per thread and {smem} bytes of "
            f"shared memory does not fit on one SM: not enough {limited_by.replace('_', ' ')}"
        )
    warps = blocks * wpb
    return {
        "blocks_per_sm": blocks,
        "warps_per_sm": warps,
        "occupancy": warps / lim["max_warps"],
        "limited_by": limited_by,
    }
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_occupancy", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
def _check_occupancy():
    T4_SM, H100_SM = sm_limits("T4"), sm_limits("H100_SXM")
    _o = occupancy(256, 32, 0, T4_SM)
    assert _o == {
        "blocks_per_sm": 4,
        "warps_per_sm": 32,
        "occupancy": 1.0,
        "limited_by": "threads",
    }, f"T4, 256 threads x 32 registers: 4 blocks fill all 32 warps, got {_o}"
    _o = occupancy(256, 64, 0, H100_SM)
    assert (
        _o["blocks_per_sm"] == 4 and _o["occupancy"] == 0.5 and _o["limited_by"] == "registers"
    ), f"H100, 64 registers per thread: 2,048 registers per warp, 32 warps, 4 blocks, got {_o}"
    _o = occupancy(32, 16, 0, T4_SM)
    assert _o["blocks_per_sm"] == 16 and _o["limited_by"] == "blocks", (
        f"T4, one-warp blocks: the 16-block limit leaves 16 of 32 warps, got {_o}"
    )
    _o = occupancy(96, 40, 0, H100_SM)
    assert _o["blocks_per_sm"] == 16 and _o["limited_by"] == "registers", (
        f"H100, 96 threads x 40 registers: 12 warps in each of 4 sub-partitions, 16 blocks, got {_o}"
    )
    _o = occupancy(128, 32, 38397, H100_SM)
    assert _o["blocks_per_sm"] == 5 and _o["limited_by"] == "shared_memory", (
        f"H100, 38,397 B + the 1 KB reserve, rounded to 39,424 B: 5 blocks, got {_o}"
    )
    assert type(_o["occupancy"]) is float and type(_o["warps_per_sm"]) is int, "plain float and int"
    assert occupancy(48, 0, 0, T4_SM)["warps_per_sm"] == 32, "48 threads still take two whole warps"
    expect_raises(ValueError, occupancy, 302, 174, 0, T4_SM)  # fails the per-block register check
    expect_raises(ValueError, occupancy, 2048, 32, 0, H100_SM)  # more than 1,024 threads per block
    expect_raises(ValueError, occupancy, 256, 0, 228 * 1024, H100_SM)  # more than 227 KB per block
    expect_raises(TypeError, occupancy, 256.0, 32, 0, T4_SM)


_check_occupancy()
del _check_occupancy
print("occupancy: self-checks passed")


# %% tags=["demo"]
import matplotlib.pyplot as plt

# Occupancy against registers per thread, at every whole register count: the step is drawn
# from each count to the next (where="post"), so each drop sits at the first count that loses
# a block.
register_counts = np.arange(1, 256)
fig, ax = plt.subplots(figsize=(8, 4.5))
for gpu, style in (("T4", "-"), ("H100_SXM", "--")):
    limits = sm_limits(gpu)
    fraction = [occupancy(256, int(r), 0, limits)["occupancy"] for r in register_counts]
    ax.step(register_counts, fraction, style, where="post", label=f"{gpu}, 256 threads per block")
    drops = [
        int(register_counts[i]) for i in range(1, len(fraction)) if fraction[i] < fraction[i - 1]
    ]
    print(f"{gpu}: occupancy drops at {drops} registers per thread")
ax.set_xlabel("registers per thread")
ax.set_ylabel("occupancy (fraction of the SM's warps)")
ax.set_ylim(0, 1.05)
ax.set_title("More registers per thread, fewer resident warps")
ax.grid(True, alpha=0.3)
ax.legend()
fig.tight_layout()
plt.show()

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
#
# What the grader checks: `a`, `b` and `c` are 1-D arrays of one float dtype, float32 or float64
# (both are tested), and the sum must keep that dtype's precision, so do not convert inside the
# kernel. Sizes from 1 to a few thousand on several blocks, and the PTX compile for the T4
# (signature `void(float32[:], float32[:], float32[:])`). On a GPU runner, at 2^24 float32
# elements and 256 threads per block, your kernel must reach at least **60% of the bandwidth of
# the grader's own one-element-per-thread `a + b` kernel**, launched and timed the same way in
# the same run on the same GPU. Each launch is timed on the GPU itself (CUDA events, every launch
# queued before the first runs), so Numba's launch cost, tens of microseconds, is not counted:
# on an H200 the kernel itself takes about 45 µs. Both are plain streams of 12 bytes per element,
# 201 MB per launch, more than twice the L2 cache of every course GPU, so no launch finds the last
# one's data there. One element per thread should reach 90-100% of the grader's kernel on a T4,
# an A100, an H100 and an H200, a margin of 1.5x or more over the bar.
# How kernels are graded: the grader reads each kernel from your notebook's source, compiles it
# for the course GPU (a T4, compute capability 7.5) and only then launches it, in the simulator or
# on a GPU. A kernel that does not compile for the GPU earns none of its points, even if the
# simulator runs it. The rules the grader reads a kernel by (a kernel that breaks one earns none
# of its points, and the feedback names every line involved):
#
# * a kernel is a plain `@cuda.jit` function at the top level of its cell (that one decorator,
#   positional parameters, no default values), defined once, or again with the same code;
# * inside it, anything Numba compiles for a GPU: its arguments, `cuda`, `numba`, `math` and
#   `numpy`, `@cuda.jit(device=True)` helpers, functions and lambdas defined inside the kernel,
#   and the builtins Numba supports on a GPU (`range`, `len`, `min`, `max`, `abs`, `pow`,
#   `divmod`, `round`, `int`, `float`, `bool`, `complex`, `enumerate`, `zip`, `iter`, `next`,
#   `slice`, `print`); not a class, an import or `global` inside a kernel, and no builtin Numba
#   does not compile for a GPU (`sum`, `getattr`, `isinstance`, `str`...);
# * a module-level name a kernel reads is a constant: a number, a tuple of numbers, or
#   arithmetic on other such constants (`TILE = 32`, `ROWS_PER_PASS, PASSES = 4, TILE // 4`),
#   bound only by top-level assignments; bound again (the same cell run twice, say), it must
#   get the same value each time, since a GPU kernel is compiled with one value.


# %% nbgrader={"grade": false, "grade_id": "vector_add", "locked": false, "schema_version": 3, "solution": true, "task": false}
@cuda.jit
def vector_add(a, b, c):
    """Kernel: c[i] = a[i] + b[i], one element per thread (1-D arrays of equal size).

    Launch with at least c.size threads; threads whose index is >= c.size do nothing.
    """
    ### BEGIN SOLUTION
    i = cuda.grid(1)  # grader: public
    if i < c.size:  # grader: public
        c[i] = a[i] + b[i]  # grader: public
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_vector_add", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
def _check_vector_add():
    _rng = np.random.default_rng(0)
    _a = _rng.standard_normal(1000).astype(np.float32)
    _b = _rng.standard_normal(1000).astype(np.float32)
    _c = np.full_like(_a, np.nan)
    vector_add[4, 256](_a, _b, _c)  # 1,024 threads for 1,000 elements: the bounds check matters
    expect_written("vector_add", _c)
    np.testing.assert_allclose(_c, _a + _b, rtol=1e-6, err_msg="vector_add: c[i] != a[i] + b[i]")
    _c64 = np.full(300, np.nan)
    vector_add[3, 128](_a[:300].astype(np.float64), _b[:300].astype(np.float64), _c64)
    np.testing.assert_array_equal(
        _c64,
        _a[:300].astype(np.float64) + _b[:300],
        err_msg="vector_add on float64: keep the dtype",
    )


_check_vector_add()
del _check_vector_add
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
# * launch *your* `vector_add` (the grader checks that the wrapper's result comes from it) with
#   your `launch_config`, then bring the result back with `.copy_to_host()`.
#
# The kernel indexes 1-D arrays, so flatten multi-dimensional inputs (`np.ascontiguousarray(x).ravel()`)
# and reshape the result. The output has the inputs' dtype (NumPy's common dtype if they differ),
# and an empty input gives an empty output. Inputs that do not hold numbers raise `TypeError`.
# The wrapper earns its points only by launching your own
# `vector_add` (`vector_add[blocks, threads](...)` in its body): the grader records each launch
# and repeats it with your kernel on the test's own inputs, every output array starting as NaN,
# and your result must be what those launches write; a result computed or filled in on the host
# earns nothing.


# %% nbgrader={"grade": false, "grade_id": "gpu_vector_add", "locked": false, "schema_version": 3, "solution": true, "task": false}
def gpu_vector_add(a, b, threads_per_block=256):
    """Host wrapper: a + b computed by `vector_add` on the device; returns a numpy array.

    a and b must have the same shape (ValueError otherwise); any shape works (flattened for the
    launch, reshaped after). The result has the inputs' dtype (their common dtype if they differ).
    Empty inputs give an empty result without a launch; non-numeric dtypes raise TypeError.
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
def _check_gpu_vector_add():
    _x = np.arange(700, dtype=np.float32)
    _y = np.full(700, 0.5, dtype=np.float32)
    _z = gpu_vector_add(_x, _y, threads_per_block=128)
    assert isinstance(_z, np.ndarray) and _z.dtype == np.float32 and _z.shape == (700,), (
        f"expected a float32 array of shape (700,), got {type(_z).__name__} {getattr(_z, 'shape', '')}"
    )
    np.testing.assert_allclose(_z, _x + _y, err_msg="gpu_vector_add: wrong sums")
    _grid = gpu_vector_add(np.ones((3, 5)), np.ones((3, 5)))
    assert _grid.shape == (3, 5), f"a (3, 5) input gives a (3, 5) result, got {_grid.shape}"
    assert gpu_vector_add(np.ones(5), np.ones(5)).dtype == np.float64, (
        "output keeps the input dtype"
    )
    expect_raises(ValueError, gpu_vector_add, np.ones(4), np.ones(5))


_check_gpu_vector_add()
del _check_gpu_vector_add
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
# **milliseconds**, result in **GB/s with 1 GB = 10⁹ bytes** (the unit GPU datasheets use), as a
# Python `float`. A time that is not positive or a negative byte count raises `ValueError`; a
# value that is not a number raises `TypeError`.


# %% nbgrader={"grade": false, "grade_id": "effective_bandwidth_gbs", "locked": false, "schema_version": 3, "solution": true, "task": false}
def effective_bandwidth_gbs(bytes_moved, elapsed_ms):
    """Effective bandwidth in GB/s (1 GB = 1e9 bytes) of moving bytes_moved in elapsed_ms.

    bytes_moved must be >= 0 and finite; elapsed_ms (milliseconds) must be > 0 and finite
    (ValueError otherwise; TypeError for non-numbers). Returns a Python float.
    """
    ### BEGIN SOLUTION
    if isinstance(bytes_moved, bool) or not isinstance(bytes_moved, numbers.Real):
        raise TypeError(f"bytes_moved must be a number of bytes, got {bytes_moved!r}")
    nbytes = float(bytes_moved)
    if not (nbytes >= 0 and math.isfinite(nbytes)):
        raise ValueError(f"bytes_moved must be a finite number of bytes >= 0, got {bytes_moved!r}")
    milliseconds = _require_positive("elapsed_ms", elapsed_ms, "milliseconds")
    return nbytes / (milliseconds * 1e-3) / 1e9
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_effective_bandwidth_gbs", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
def _check_effective_bandwidth_gbs():
    assert abs(effective_bandwidth_gbs(1e9, 1000.0) - 1.0) < 1e-12, (
        "1e9 bytes in one second is 1 GB/s"
    )
    assert abs(effective_bandwidth_gbs(12e6, 1.0) - 12.0) < 1e-9, "12 MB in 1 ms is 12 GB/s"
    _bytes = 3 * 4 * 2**24  # FP32 vector add of 16M elements
    assert abs(effective_bandwidth_gbs(_bytes, 0.06) - 3355.4) < 0.1, "201 MB in 60 us"
    assert effective_bandwidth_gbs(0, 1.0) == 0.0, "no bytes, no bandwidth"
    expect_raises(ValueError, effective_bandwidth_gbs, 1e6, 0.0)
    expect_raises(ValueError, effective_bandwidth_gbs, -1, 1.0)


_check_effective_bandwidth_gbs()
del _check_effective_bandwidth_gbs
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

    dev_a, dev_b = cuda.to_device(a_host), cuda.to_device(b_host)
    dev_c = cuda.device_array_like(dev_a)
    vector_add[blocks, tpb](dev_a, dev_b, dev_c)  # warm-up (includes compilation)
    cuda.synchronize()
    start, end = cuda.event(), cuda.event()
    repeats = 50
    start.record()
    for _ in range(repeats):
        vector_add[blocks, tpb](dev_a, dev_b, dev_c)
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
    print("Simulator timings mean nothing: each CUDA thread runs as Python code here.")

# %% [markdown]
# ### Where else the time goes: the PCIe copies and the launch itself
#
# The timing above starts with the data already in HBM. Your `gpu_vector_add` does more: it
# copies `a` and `b` from host memory to the GPU and `c` back, over PCIe. The T4 sits on a PCIe
# Gen3 x16 link, 16 GB/s in each direction (`pcie_gbs` in course.toml), against 320 GB/s of
# GDDR6. For 2^24 float32 elements the wrapper moves the same 3 x 4 x 2^24 bytes (201 MB) over
# both, so
#
# $$ t_\text{PCIe} \approx \frac{201\ \text{MB}}{16\ \text{GB/s}} \approx 12.6\ \text{ms}
# \qquad\text{against}\qquad t_\text{kernel} \approx \frac{201\ \text{MB}}{320\ \text{GB/s}}
# \approx 0.63\ \text{ms}: $$
#
# twenty times longer, before any driver overhead, and pageable (ordinary NumPy) host memory
# reaches only part of the link's figure. That is why real programs keep tensors on the GPU from
# one operation to the next and copy to the host only what they must: an inference server
# uploads the weights once and streams out only tokens.
#
# At the other end of the scale a launch itself costs time: the host has to prepare and submit
# it even when the kernel has no work. From C++ (`cudaLaunchKernel`) that is about 3 to 5 µs,
# mostly the driver. Eager PyTorch pays far more per operation: Python, the dispatcher and the
# launch come to some 10 to 20 µs a call (profilers' typical figure; it varies with the CPU);
# Numba, launching from Python, checks and converts every argument first: tens of µs. A kernel
# whose real work is shorter than its launch is **overhead-bound**: neither roof of the roofline
# applies, and a faster GPU does not help. Time per launch is then about `max(launch overhead,
# bytes / bandwidth)`; for the vector add on the T4, `3 x 4 x n / 320 GB/s` passes 5 µs only
# once `n` is over about 130,000 elements. A small model's decode step, dozens of small kernels
# per token, often lives in this regime, which is why serving engines capture a whole step as
# one CUDA graph, or fuse kernels, so that it is launched once instead of paying eager PyTorch's
# cost for every operation.
#
# On a GPU the cell below measures the whole wrapper, the kernel alone, and the host time of
# one launch of a one-element kernel twice: launched by Numba (its Python dispatch included:
# the figure for this notebook's kernels, not for a serving engine's) and by PyTorch. In the
# simulator it prints the predictions from the formulas above instead.

# %% tags=["demo"]
t4_peak_flops, t4_bandwidth = peak_figures("T4")
t4_pcie = _hardware_table("T4")["pcie_gbs"] * 1e9  # byte/s, one direction
n_big = 2**24
bytes_big = 3 * 4 * n_big
print(
    f"prediction for the T4, n = 2^24: PCIe {bytes_big / t4_pcie * 1e3:.1f} ms, "
    f"kernel {bytes_big / t4_bandwidth * 1e3:.2f} ms"
)
print(f"the vector add passes 5 us of work at n = {5e-6 * t4_bandwidth / 12:,.0f} elements")
if ON_GPU:
    host_a = np.random.default_rng(4).standard_normal(n_big).astype(np.float32)
    host_b = np.ones(n_big, dtype=np.float32)
    gpu_vector_add(host_a, host_b)  # warm-up
    t0 = time.perf_counter()
    gpu_vector_add(host_a, host_b)
    wrapper_ms = (time.perf_counter() - t0) * 1e3
    dev_a, dev_b = cuda.to_device(host_a), cuda.to_device(host_b)
    dev_c = cuda.device_array_like(dev_a)
    blocks, tpb = launch_config(n_big)
    start, end = cuda.event(), cuda.event()
    start.record()
    vector_add[blocks, tpb](dev_a, dev_b, dev_c)
    end.record()
    end.synchronize()
    kernel_ms = cuda.event_elapsed_time(start, end)
    tiny_a, tiny_c = cuda.to_device(host_a[:1]), cuda.device_array(1, dtype=np.float32)
    vector_add[1, 32](tiny_a, tiny_a, tiny_c)
    cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(200):
        vector_add[1, 32](tiny_a, tiny_a, tiny_c)
    cuda.synchronize()
    numba_us = (time.perf_counter() - t0) / 200 * 1e6
    import torch

    one = torch.ones(1, device="cuda")
    torch.add(one, one)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(200):
        torch.add(one, one)
    torch.cuda.synchronize()
    torch_us = (time.perf_counter() - t0) / 200 * 1e6
    print(
        f"measured: gpu_vector_add {wrapper_ms:.1f} ms in all, the kernel {kernel_ms:.2f} ms; "
        f"one launch of a 1-element kernel: {numba_us:.1f} us from Numba (its Python dispatch "
        f"included), {torch_us:.1f} us from PyTorch"
    )
else:
    print("simulator: nothing measured here; on a GPU this cell times the copies and a launch")

# %% [markdown]
# ### Lanes that talk: a warp sum with shuffles
#
# §4 said the warp is the real unit of execution. The lanes of a warp can also trade values
# directly, register to register, without shared memory or a barrier: a **warp shuffle**.
# `cuda.shfl_down_sync(mask, value, delta)` is executed by every lane named in `mask` at once;
# each gets the `value` that lane `lane + delta` passed in, where `lane` is its position in its
# warp (`cuda.threadIdx.x % 32` in a 1-D block whose size is a multiple of 32). A lane whose
# `lane + delta` is past lane 31 gets its own `value` back. `mask` is a 32-bit integer with one
# bit per lane that takes part: `0xFFFFFFFF` for the whole warp. Every lane the mask names must
# reach the same shuffle; a lane that returned early or skipped it inside an `if` leaves the
# others waiting on a value that never comes (undefined on a GPU; in the grader's simulator an
# error naming the line, the warp and the missing lanes).
#
# A sum over the 32 lanes of a warp then takes 5 steps instead of 31 additions in one lane:
# `value += cuda.shfl_down_sync(0xFFFFFFFF, value, delta)` for `delta = 16, 8, 4, 2, 1`. After
# the step with 16, lane `l < 16` holds `x[l] + x[l + 16]`; after 8, lane `l < 8` holds the sum
# of four elements; after the step with 1, lane 0 holds the sum of all 32. The lanes above keep
# partial sums that nobody reads. This is how a block reduction, a softmax's maximum and sum, or
# a layer norm's statistics are computed inside a warp before any shared memory is touched.
#
# **Exercise.** Write the kernel `warp_sum(x, out)`: `x` is a 1-D float32 array of any size
# `n >= 1`, `out` a float32 array of `ceil(n / 32)` elements, and warp `w` (the threads with
# global index `32 * w` to `32 * w + 31`, `i = cuda.grid(1)`) writes `out[w] = x[32 * w] + ... +
# x[32 * w + 31]`, the sum made with `cuda.shfl_down_sync` and written by lane 0. It is launched
# with blocks whose size is a multiple of 32 and enough blocks for `n` threads, so the last warp
# may be **partial**: its lanes with `i >= n` add `0` but still take part in every shuffle (the
# mask stays `0xFFFFFFFF`), and a whole warp past the end writes nothing. Keep the float32
# values (the grader compares with the exact sum, to a tolerance of `1e-5` times the sum of the
# absolute values of the warp's elements). The grader compiles it for the T4 with the signature
# `void(float32[:], float32[:])`, and profiles it on 1,000 elements in blocks of 256 threads:
# `x` is read once, in one request per warp (one element per lane), `out` written once per
# warp, and nothing goes through shared memory or atomics.


# %% nbgrader={"grade": false, "grade_id": "warp_sum", "locked": false, "schema_version": 3, "solution": true, "task": false}
@cuda.jit
def warp_sum(x, out):
    """Kernel: out[w] = x[32 * w] + ... + x[32 * w + 31], one warp per 32 consecutive elements.

    x: 1-D float32, any size n >= 1; out: 1-D float32 of ceil(n / 32) elements. Launch with a
    block size that is a multiple of 32 and at least n threads. Lanes with i >= n add 0 but take
    part in every shuffle (mask 0xFFFFFFFF); lane 0 of each warp writes its sum.
    """
    ### BEGIN SOLUTION
    i = cuda.grid(1)
    lane = cuda.threadIdx.x % 32
    value = x[i] if i < x.size else numba.float32(0.0)
    delta = 16
    while delta > 0:  # 16, 8, 4, 2, 1: lane 0 ends with the warp's sum
        value += cuda.shfl_down_sync(0xFFFFFFFF, value, delta)  # grader: public (the text)
        delta //= 2
    if lane == 0 and i // 32 < out.size:
        out[i // 32] = value
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_warp_sum", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
def _check_warp_sum():
    if not ON_GPU:  # Numba's own simulator has no warp shuffles; the course's (the grader's) has
        try:
            from grader.simt import simulator as _course_simulator
        except ImportError:  # the notebook opened on its own (Colab): `grader check` runs it
            print("warp_sum: not checked here (Numba's simulator has no warp shuffles)")
            return
        if not _course_simulator.install():
            print("warp_sum: not checked here (Numba's simulator has no warp shuffles)")
            return
    _x = np.random.default_rng(3).standard_normal(1000).astype(np.float32)
    _out = np.full(32, np.nan, dtype=np.float32)  # 31 whole warps and one of 8 elements
    warp_sum[4, 256](_x, _out)  # 1,024 threads: the last warp's lanes past 1,000 add 0
    expect_written("warp_sum", _out)
    _want = np.add.reduceat(_x.astype(np.float64), np.arange(0, 1000, 32))
    np.testing.assert_allclose(_out, _want, rtol=1e-5, atol=1e-5, err_msg="warp_sum: wrong sums")
    print("warp_sum: self-checks passed")


_check_warp_sum()
del _check_warp_sum


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
# the bus: an 8× loss of bandwidth before any arithmetic happens. Two programs that do the same
# arithmetic on the same data can therefore differ by that factor purely through how the data is
# arranged in memory. Walking a row-major matrix column by column, or a KV cache stored in an
# order that does not match how decode reads it, wastes most of every sector. (PagedAttention,
# Kwon et al. 2023, deliberately splits the KV cache into fixed-size pages: a little contiguity is
# given up in exchange for far less wasted memory.)
#
# **Exercise.** Write `sectors_per_warp(stride, itemsize=4, warp_size=32, sector_bytes=32)`: lane
# `l` reads the `itemsize` bytes that start at byte address `l * stride * itemsize` (the warp
# starts on a sector boundary); return how many *distinct* sectors the warp's bytes fall in. An
# element can touch more than one sector: one wider than a sector (`itemsize=64` spans two), or
# one that straddles a sector boundary (with `stride=3, itemsize=12`, lane 6, the first that
# straddles, reads bytes 216 to 227, in sectors 6 and 7), so count every sector from the one
# holding an element's first byte to the one holding its last. Stride 0 (every lane reads the same element) touches the sectors of
# one element. Return a Python `int`. A negative stride or a non-positive size is a
# `ValueError`; an argument that is not an integer (`1.0`, `True`) is a `TypeError`. Sizes can
# be large (an `itemsize` of a million bytes), so count ranges of sectors rather than listing
# every byte.


# %% nbgrader={"grade": false, "grade_id": "sectors_per_warp", "locked": false, "schema_version": 3, "solution": true, "task": false}
def sectors_per_warp(stride, itemsize=4, warp_size=32, sector_bytes=32):
    """Distinct sector_bytes-sized sectors holding the bytes one warp's load reads.

    Lane l reads the itemsize bytes from address l * stride * itemsize. stride is in elements
    (>= 0); itemsize and sector_bytes in bytes, warp_size in lanes (all >= 1; ValueError
    otherwise, TypeError for non-integers). The warp's first address is sector-aligned.
    Returns a Python int (stride 0 -> the sectors of one element).
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
    size, sector = int(itemsize), int(sector_bytes)
    step = int(stride) * size
    count, last_counted = 0, -1
    for lane in range(int(warp_size)):  # lanes read at non-decreasing addresses
        first, last = lane * step // sector, (lane * step + size - 1) // sector
        count += last - max(first, last_counted + 1) + 1 if last > last_counted else 0
        last_counted = max(last_counted, last)
    return count
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_sectors_per_warp", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
def _check_sectors_per_warp():
    assert sectors_per_warp(1) == 4, "32 consecutive fp32 values = 128 bytes = 4 sectors"
    assert sectors_per_warp(32) == 32, "each lane in its own sector"
    assert sectors_per_warp(0) == 1, "all lanes read the same element"
    assert sectors_per_warp(2) == 8, "stride 2: 256 bytes span 8 sectors"
    assert sectors_per_warp(1, itemsize=2) == 2, "32 consecutive fp16 values = 64 bytes"
    assert sectors_per_warp(1000) == 32, "a large stride: one sector per lane"
    assert sectors_per_warp(1, itemsize=64) == 64, "64-byte elements: two sectors each"
    assert sectors_per_warp(3, itemsize=12) == 36, "12-byte elements 36 bytes apart: some straddle"
    assert type(sectors_per_warp(1)) is int, "return a Python int"
    expect_raises(ValueError, sectors_per_warp, -1)
    expect_raises(ValueError, sectors_per_warp, 1, itemsize=0)
    expect_raises(ValueError, sectors_per_warp, 1, sector_bytes=0)
    print("sectors_per_warp: self-checks passed")


_check_sectors_per_warp()
del _check_sectors_per_warp


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
# Choose the strides with care. With `n = 2**24` and a power-of-two stride `s`, the indices
# `(i * s) % n` take only `n / s` distinct values: stride 32 reads the same 1/32 of the array 32
# times over, a 2 MB slice that stays in the L2 cache, and the measurement shows L2's speed rather
# than the cost of scattered DRAM reads. An odd stride shares no factor with `2**24`, so the
# wrapped indices visit every element exactly once. The demo uses odd strides near each power of
# two (3, 5, 9, 17, 33). For fp32 they touch 12, 20, 32, 32 and 32 sectors per warp (ask your
# `sectors_per_warp`): more than their even neighbours 2 and 4 (8 and 16 sectors), while from
# stride 8 on every lane has a sector of its own whichever stride you pick.
#
# What the grader checks: `src` and `dst` are 1-D float32 arrays (`dst` may be shorter than
# `src`), `stride` an integer >= 0, several blocks, and the PTX compile for the T4 with the
# signature `void(float32[:], float32[:], int64)`.
#
# **Counting sectors without a GPU.** Nobody can time sectors in a simulator, but they can be
# counted. The grader launches your kernels once more in the simulator with every global and
# shared memory access recorded, and groups them as the hardware does: a warp is 32 consecutive
# threads of a block (`threadIdx.x` fastest), and one *request* is what the warp's lanes ask for
# at the same line of your kernel at the same time (a lane's third access at a line meets the
# other lanes' third access there). For each global request it counts the 32-byte sectors
# touched against the *ideal*: the distinct bytes asked for, in whole sectors (4 for 32
# neighbouring float32 values, 1 when every lane reads the same element). `grader profile
# gpu_fundamentals` prints this table for each of your kernels, much like the memory workload
# section of NVIDIA's Nsight Compute; `grader check` prints one line per kernel, and your pull
# request's report carries the tables. The grader profiles `strided_copy` with `src.size = 32 x
# stride` (so no warp wraps around `src`) and with elements of 1, 2, 4, 8 and 16 bytes: every
# read request must touch exactly `sectors_per_warp(stride, itemsize)` sectors, the course's
# answer for that stride and size, and every write request the ideal.
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
    if i < dst.size:  # grader: public
        dst[i] = src[(i * stride) % src.size]  # grader: public
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_strided_copy", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
def _check_strided_copy():
    _src = np.arange(512, dtype=np.float32)
    for _stride in (1, 3, 32):
        _dst = np.full(300, np.nan, dtype=np.float32)
        strided_copy[2, 256](_src, _dst, _stride)  # 512 threads for 300 outputs
        expect_written("strided_copy", _dst)
        np.testing.assert_array_equal(
            _dst, _src[(np.arange(300) * _stride) % 512], err_msg=f"strided_copy, stride {_stride}"
        )
    print("strided_copy: self-checks passed")


_check_strided_copy()
del _check_strided_copy


# %% [markdown]
# ### Demo: bandwidth against stride
#
# On a GPU this copies 16M FP32 values at each stride and reports the *useful* bandwidth (8 bytes
# per element: one read, one write). As the stride grows, each warp pulls in more sectors for the
# same useful data and the bandwidth drops until every lane has a sector of its own (stride 8 and
# beyond for fp32). Beside the measurement it draws a prediction from `sectors_per_warp`: per
# warp the kernel reads 128 useful bytes but brings `32 x sectors` bytes over the bus, and writes
# 128 bytes coalesced, so the useful bandwidth is the stride-1 bandwidth times
# `256 / (32 x sectors + 128)`. In the simulator it checks the results and draws only the
# prediction, for a T4 at its datasheet bandwidth, labelled as such.

# %% tags=["demo"]
import matplotlib.pyplot as plt

src = np.arange(STRIDE_N, dtype=np.float32)
blocks, tpb = launch_config(STRIDE_N)
strides = [1, 3, 5, 9, 17, 33]  # odd: each element is read exactly once (see above)
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

# The prediction: per warp, 128 useful bytes are read and 128 written, while the bus carries
# 32 bytes per sector read plus the 128 coalesced bytes written.
base_gbs = bandwidths[0] if ON_GPU else peak_figures("T4")[1] / 1e9  # stride 1, or the datasheet
predicted = [base_gbs * 256 / (32 * sectors_per_warp(s) + 128) for s in strides]
fig, ax = plt.subplots(figsize=(7, 4))
if ON_GPU:
    ax.plot(strides, bandwidths, "o-", label="measured")
    ax.set_title(f"strided_copy on {cuda.get_current_device().name}")
else:
    ax.set_title("strided_copy on a T4: prediction only (simulator, nothing measured)")
    print(f"strided_copy correct for strides {strides} on {STRIDE_N:,} elements (simulator).")
    print("Simulator timings mean nothing: the plot shows the T4's predicted curve only.")
ax.plot(
    strides, predicted, "s--", label=f"predicted: {base_gbs:.0f} GB/s x 256 / (32 x sectors + 128)"
)
ax.set_xscale("log", base=2)
ax.set_xticks(strides, [str(s) for s in strides])
ax.set_xlabel("read stride (elements)")
ax.set_ylabel("useful bandwidth (GB/s)")
ax.set_ylim(0, base_gbs * 1.1)
ax.grid(True, alpha=0.3)
ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# ### Read your kernel's memory profile
#
# `grader profile gpu_fundamentals strided_copy` (in a terminal, in a clone of your fork with the
# student profile installed: no GPU needed) launches your `strided_copy` at strides 1, 2, 3, 8
# and 32 on two warps and prints, for each launch, one row per line of your kernel that touches
# memory. For stride 2 it reads:
#
# ```
# line                      array  memory  op     requests  sectors/req  ideal  efficiency
# line N of gpu_fundam...   src    global  load   2         8.0          4.0    50%
# line N of gpu_fundam...   dst    global  store  2         4.0          4.0    100%
#   global memory: 768 B moved (512 B loaded for 256 B asked, 256 B stored for 256 B asked)
# ```
#
# where `line N of gpu_fundamentals.py` is the line of your own file that reads `src` and writes
# `dst` (if you edit the `.ipynb`, it names the cell instead: `code cell C (under "### ..."),
# line L of gpu_fundamentals.ipynb`, C counting code cells only);
#
# * **requests**: warp-wide accesses made by that line (2 warps, one each);
# * **sectors/req** against the **ideal**: 32-byte sectors each request touched, and the fewest
#   the bytes it asked for could have filled. `src` at stride 2 touches `sectors_per_warp(2) =
#   8` sectors for 4 sectors' worth of data: half of every sector is wasted, an efficiency of
#   50%. The write is coalesced: 4 of 4;
# * **global memory**: bytes that crossed between the SMs and DRAM (sectors x 32). Divided by
#   the T4's 320 GB/s it is a lower bound on the kernel's time, the bound the roofline of §3
#   draws.
#
# Nsight Compute reports the same quantities on a GPU (the memory workload analysis: requests,
# sectors, sectors per request). The grader's figures come from the simulator instead, so they
# are the same on your laptop, in CI and on the GPU runner. What they leave out: caches (a
# sector read twice is counted twice here, where L1 or L2 might serve it the second time) and
# time (no latency, no overlap). `grader check` prints one line per kernel, and your pull
# request's report carries every table.

# %% tags=["demo"]
# !grader profile gpu_fundamentals strided_copy

# %% [markdown]
# ## §8 Shared memory: a transpose that coalesces both ways
#
# Some operations cannot be made contiguous by choosing a better stride. A matrix transpose reads
# rows and writes columns: whichever way the threads of a warp are laid out, one of the two sides
# is strided. PyTorch meets this whenever `x.t().contiguous()` runs, and attention kernels meet it
# when they need $K^\top$. Here you write the obvious kernel, measure what it costs, and then fix
# it with shared memory.
#
# **Two-dimensional launches.** A launch can arrange its blocks and threads in 2-D:
# `kernel[(grid_x, grid_y), (block_x, block_y)](...)`. Inside, `x, y = cuda.grid(2)` gives the
# thread's global column `x = blockIdx.x * blockDim.x + threadIdx.x` and row `y` (the same with
# `.y`). The 32 lanes of a warp are consecutive in `threadIdx.x`, so *x should run along the
# contiguous (last) index* of a row-major array: then a warp's 32 accesses are neighbours.
#
# For a `rows x cols` source, `src[y, x]` read by a warp is contiguous (32 neighbours in one row)
# but the matching write `dst[x, y]` touches 32 different rows of `dst`, each `rows` elements
# apart: 32 sectors for 128 useful bytes, exactly the strided pattern of §7.
#
# **Exercise.** Write `transpose_naive(src, dst)`: thread `(x, y)` copies `src[y, x]` into
# `dst[x, y]`, for every `y < src.shape[0]` and `x < src.shape[1]`, where `dst` has shape
# `(src.shape[1], src.shape[0])`. Any block shape must work, and so must any matrix shape,
# including shapes that are not multiples of the block (bounds-check both coordinates). The
# grader tests float32 matrices in the simulator and compiles the kernel for the T4 with the
# signature `void(float32[:, :], float32[:, :])`. It also profiles it on a 64 x 96 matrix with
# 32 x 8 blocks: the reads of `src` must be coalesced (4 sectors per request, the ideal) and the
# writes to `dst` strided (32 sectors per request), as described above. This is the slow kernel
# that the next one fixes, and the profile shows the cost before any GPU does.


# %% nbgrader={"grade": false, "grade_id": "transpose_naive", "locked": false, "schema_version": 3, "solution": true, "task": false}
@cuda.jit
def transpose_naive(src, dst):
    """Kernel: dst[x, y] = src[y, x] for all y < src.shape[0], x < src.shape[1] (2-D launch).

    x = cuda.grid(2)[0] runs along src's columns, so reads coalesce and writes are strided.
    """
    ### BEGIN SOLUTION
    x, y = cuda.grid(2)  # grader: public
    if y < src.shape[0] and x < src.shape[1]:
        dst[x, y] = src[y, x]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_transpose_naive", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
def _check_transpose_naive():
    _m = np.arange(37 * 21, dtype=np.float32).reshape(37, 21)  # neither side a multiple of the block
    _t = np.full((21, 37), np.nan, dtype=np.float32)
    transpose_naive[(3, 5), (8, 8)](_m, _t)  # 24 x 40 threads cover 21 columns x 37 rows
    expect_written("transpose_naive", _t)
    np.testing.assert_array_equal(_t, _m.T, err_msg="transpose_naive: dst[x, y] must be src[y, x]")
    print("transpose_naive: self-checks passed")


_check_transpose_naive()
del _check_transpose_naive


# %% [markdown]
# **The tiled transpose.** Shared memory is on-chip memory that every thread of a block can read
# and write, declared inside the kernel with `cuda.shared.array(shape, dtype)`; its shape must be
# made of compile-time constants such as the module-level `TILE` below. Here each block is one
# warp, `TILE = 32` threads, and moves one `TILE x TILE` tile of the matrix; lane `lane =
# cuda.threadIdx.x` owns one column of the tile:
#
# 1. for each row `r` of the tile, every lane reads one element of that row of `src` (32
#    neighbours: a coalesced read) and stores it in the shared array, `tile[r, lane]`;
# 2. `cuda.syncthreads()`: a barrier that no thread of the block passes until all of them reach
#    it, so the whole tile is in place before anyone reads it back (since Volta the lanes of a
#    warp are not guaranteed to run in step, so even a one-warp block needs it);
# 3. for each row `r` of the output tile, every lane writes one element of that row of `dst`
#    (32 neighbours again: a coalesced write), taking it from column `r` of the shared tile,
#    `tile[lane, r]`. Block `(bx, by)` of `src` lands at block `(by, bx)` of `dst`.
#
# A missing barrier does not always show in the output: the grader's simulator runs the threads
# of a block one after another, so a thread often finds what another staged even without one.
# So every kernel the grader launches also runs compute-sanitizer's four checks: a launch in which
# a thread reads or writes an element that another thread wrote with no barrier between them
# (racecheck), reads shared memory no thread wrote (initcheck), indexes outside an array, negative
# indices included (memcheck), or in which threads wait at different barriers (synccheck) earns no
# correctness points even when its output is right, and the feedback names the line, the array,
# the element and the two threads. `cuda.syncwarp()` orders the lanes of one warp, not a block.
#
# Global memory is now touched only in whole rows, both ways; the strided access has moved into
# shared memory, which has no sectors. It does have **banks**: 32 of them, 4 bytes wide, and the
# lanes of a warp that hit different addresses in the same bank wait for each other. A column of
# a `TILE x TILE` float32 array with `TILE = 32` sits entirely in one bank, a 32-way conflict.
# Declaring the tile `(TILE, TILE + 1)` shifts each row by one bank, so a column spreads over all
# 32 banks. The extra column is never used. The shape of a shared array must be made of
# constants Numba knows when it compiles, literally or as module-level integers: `TILE + 1`
# computed inside the kernel is not accepted, so the padded width has its own name, `TILE_PADDED`.
#
# Why one warp per block and a loop, rather than one thread per element? Each lane can keep many
# loads in flight, but only if the code lets it. (The grader does not force the choice: any block
# a GPU accepts, up to 1,024 threads with barriers, runs in the simulator under the sandbox's
# limits, and a kernel written for 2-D blocks that loops over its rows with a stride of
# `cuda.blockDim.y` is graded alike.) Written as `tile[r, lane] =
# src[...]` inside the loop, every iteration loads one element and stores it to shared memory, and
# the next load may not start before that store: Numba's loads go through generic addresses that
# the compiler cannot prove are not the shared tile. The warp waits a full memory latency (about
# 500 cycles) for each of its 32 elements. Load the lane's column into a local array first,
# `column = cuda.local.array(TILE, numba.float32)`, and copy it into the tile in a second loop:
# the compiler unrolls both loops over the constant `range(TILE)`, keeps `column` in registers,
# and issues all 32 loads before the first store. The machine code of the reference for the T4
# shows exactly that: 32 global loads, then 32 shared stores, 64 registers per thread, nothing
# spilled (on the H100: 32 loads, 46 registers).
#
# **Little's law** says why it matters: to stream `B` bytes/s through a latency of `L` seconds,
# `B x L` bytes must be on their way at every moment. At full bandwidth `L` is §5's loaded
# latency, about 600 ns (not the unloaded 250 ns): a T4 needs 320 GB/s x 600 ns / 40 SMs =
# 4.8 KB in flight per SM, an H100 3,350 GB/s x 600 ns / 132 SMs = 15 KB. With the
# occupancy of §5, `occupancy(TILE, 64, 4224, sm_limits("T4"))` gives 15 one-warp blocks per SM
# (limited by shared memory: 4,224 bytes rounded up to 4,352), and on the H100
# `occupancy(TILE, 46, 4224, sm_limits("H100_SXM"))` gives 32 (limited by blocks). One load in
# flight per warp is 15 x 128 bytes = 1.9 KB per SM on the T4 and 32 x 128 bytes = 4 KB on the
# H100: 40% and 27% of what they need. A column of 32 loads per warp is 60 KB and 128 KB, far more
# than either needs, so the tiled transpose runs at the speed of a plain copy.
#
# **Exercise.** Write `transpose_tiled(src, dst)`, same contract as `transpose_naive` (any shape,
# float32), launched with blocks of exactly `(TILE, 1)` threads and a grid of
# `(ceil(src.shape[1] / TILE), ceil(src.shape[0] / TILE))` blocks. Stage each tile through
# `cuda.shared.array((TILE, TILE_PADDED), numba.float32)` with a `cuda.syncthreads()` between the
# read and the write, and bounds-check every element on both sides: an element outside the
# matrix is neither loaded nor stored, but every thread must still reach the barrier (a
# `syncthreads()` inside an `if` that some threads skip can hang a real GPU). Use the module's
# `TILE`, `TILE_PADDED` and `numba.float32`, as below; the grader compiles the kernel for the T4
# with the signature `void(float32[:, :], float32[:, :])`.
#
# The grader then profiles `transpose_tiled` on a 40 x 72 matrix (one whole tile and a partial
# one each way, so the blocks at the edges are graded like the others) and checks what the
# kernel does, not how it is written:
#
# * **coalesced both ways**: every request that reads `src` or writes `dst` touches the ideal
#   number of sectors;
# * **each element once**: every element of `src` is read from global memory once and every
#   element of `dst` written once, and the data passes through shared memory, with at least one
#   barrier in every block;
# * **no bank conflicts**: the tile is stored into and read back from shared memory with one
#   wavefront per request (no two lanes of a warp wait on the same bank, on either side).
#
# Any design that behaves this way earns the points: another padding, a kernel written for 2-D
# blocks that loops over its rows with a stride of `cuda.blockDim.y`, more elements per thread,
# `cuda.syncwarp()` as the barrier of a block that is one warp (it orders the whole block).
# A tile that is filled but not used, or that only some blocks use (the whole tiles tiled and
# the partial ones at the edges copied naively, say), does not.
#
# On a GPU runner the grader also times `transpose_tiled` at 8192 x 8192: it must reach at least
# **50% of the bandwidth of your own stride-1 `strided_copy`** on the same elements, and
# `transpose_naive` must be slower than `transpose_tiled`. Each launch is timed on the GPU itself
# and moves 537 MB, far more than any course GPU's L2 cache holds, so the launch cost and the cache
# do not enter the comparison. The bar leaves a margin of about 2x on
# every course GPU: by the estimate above a tiled transpose with a column of loads in flight per
# lane keeps 60 KB (T4), 128 KB (A100, H100, H200) in flight per SM against the 5, 11, 15 and 22
# KB the four GPUs need at 600 ns, so it should run at 90-100% of the copy, while one load at a
# time per lane (1.9 to 4 KB) can fall to 20-40% of the bandwidth and fail it.

# %% nbgrader={"grade": false, "grade_id": "tile", "locked": true, "schema_version": 3, "solution": false, "task": false}
TILE = 32  # tile side, and the threads of one block: a warp moves one TILE x TILE tile
TILE_PADDED = 33  # TILE + 1: row length of the shared tile, one spare column against bank conflicts
assert TILE_PADDED == TILE + 1, "keep TILE_PADDED = TILE + 1"


# %% nbgrader={"grade": false, "grade_id": "transpose_tiled", "locked": false, "schema_version": 3, "solution": true, "task": false}
@cuda.jit
def transpose_tiled(src, dst):
    """Kernel: dst = src.T through a shared-memory tile; launch with (TILE, 1) threads per block.

    Grid: (ceil(cols / TILE), ceil(rows / TILE)) blocks for a rows x cols src. Lane l walks
    column l of the tile; reads and writes of global memory both go along rows.
    """
    ### BEGIN SOLUTION
    tile = cuda.shared.array((TILE, TILE_PADDED), numba.float32)
    # this lane's column of the tile, held in registers (the text above names this line)
    column = cuda.local.array(TILE, numba.float32)  # grader: public
    lane = cuda.threadIdx.x  # grader: public
    first_row = cuda.blockIdx.y * TILE  # of src; also the first column of this tile in dst
    first_col = cuda.blockIdx.x * TILE  # of src; also the first row of this tile in dst
    col = first_col + lane
    for r in range(TILE):  # TILE independent loads, all in flight before the first is needed
        if first_row + r < src.shape[0] and col < src.shape[1]:
            column[r] = src[first_row + r, col]
    for r in range(TILE):  # rows outside src hold junk that no store below ever reads
        tile[r, lane] = column[r]
    cuda.syncthreads()
    out_col = first_row + lane
    for r in range(TILE):
        if first_col + r < dst.shape[0] and out_col < dst.shape[1]:
            dst[first_col + r, out_col] = tile[lane, r]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_transpose_tiled", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
def _check_transpose_tiled():
    _m = np.random.default_rng(2).standard_normal((45, 33)).astype(np.float32)
    _t = np.full((33, 45), np.nan, dtype=np.float32)
    transpose_tiled[(2, 2), (TILE, 1)](_m, _t)  # 2 x 2 tiles of 32 cover 33 columns x 45 rows
    expect_written("transpose_tiled", _t)
    np.testing.assert_array_equal(_t, _m.T, err_msg="transpose_tiled: dst must equal src.T")
    print("transpose_tiled: self-checks passed")


_check_transpose_tiled()
del _check_transpose_tiled


# %% tags=["demo"]
# The worked example of "Little's law" above: the reference's registers per thread, read from its
# machine code (grader.core.cubin), and the shared tile of TILE x TILE_PADDED float32 values.
for gpu, registers in (("T4", 64), ("H100_SXM", 46)):
    occ = occupancy(TILE, registers, TILE * TILE_PADDED * 4, sm_limits(gpu))
    in_flight_kb = occ["warps_per_sm"] * TILE * 128 / 1e3  # TILE loads of 128 bytes per warp
    print(f"{gpu}: {occ} -> {in_flight_kb:.0f} KB of loads in flight per SM")

# %% [markdown]
# ### The two transposes, profiled
#
# `grader profile gpu_fundamentals transpose_naive transpose_tiled` shows what the tile bought,
# before any GPU times it (64 x 96 float32, every element read and written once):
#
# | kernel | reads of `src` | writes to `dst` | bytes moved | shared memory |
# |---|---|---|---|---|
# | `transpose_naive` | 4 sectors/request (ideal 4) | 32 sectors/request (ideal 4) | 221,184 B | none |
# | `transpose_tiled` | 4 (ideal 4) | 4 (ideal 4) | 49,152 B | one wavefront per request, 1 barrier per block |
#
# The naive kernel moves 4.5 times the bytes for the same result: 24,576 B read and 196,608 B
# written, where 24,576 B each way would do. The tiled one moves exactly `2 x 64 x 96 x 4`
# bytes, and its strided accesses went to shared memory, where the padded tile keeps them to one
# wavefront each (with an unpadded `(TILE, TILE)` tile the same table shows 32-way bank conflicts:
# 32 wavefronts per request).

# %% [markdown]
# ### Measuring the price of a strided write
#
# **Exercise.** Write `coalescing_slowdown(n=8192)`: the time of your `transpose_naive` on an
# `n x n` float32 matrix divided by the time of a contiguous copy of the same `n * n` elements
# with your `strided_copy` at stride 1. Same bytes read, same bytes written; only the pattern of
# the writes differs. Measure carefully:
#
# * copy the data to the device once (`cuda.to_device`, `cuda.device_array`) and launch on those
#   device arrays, so that no transfer over PCIe is timed;
# * launch `transpose_naive` with 32 x 8 blocks and `strided_copy` with `launch_config(n * n)`;
# * warm each kernel up with one launch before timing it (the first launch compiles it);
# * on a GPU, launches are asynchronous: time a loop of launches with `cuda.event()` pairs
#   (`start.record()`, launches, `end.record()`, `end.synchronize()`, then
#   `cuda.event_elapsed_time(start, end)`), take several such samples and use the **median**; in
#   the simulator use `time.perf_counter()` around a single launch;
# * return a Python `float`; `n` must be an integer >= 1 (`ValueError` for `n < 1`, `TypeError`
#   for a non-integer).
#
# In the simulator the ratio means nothing (its timings are Python's, not a memory system's), so
# the self-check only asks for a positive number: the profile of `transpose_naive` above is the
# simulator's view of the same cost. On a GPU runner the grader calls `coalescing_slowdown(8192)`
# and expects **at least 1.5**, and it times your two kernels itself: your returned ratio must be
# within a factor of 2 of the ratio it measures, each launch timed on the GPU itself, the two
# kernels in turn. A naive transpose of that size should take 2 to 4
# times as long as the copy on a T4, an A100, an H100 and an H200 (its strided writes cost 32
# sectors per warp where the copy's cost 4), a margin of 1.3x or more over 1.5. Both tests pay only when the grader's record of
# the call shows that it launched your `transpose_naive` and your `strided_copy`: a ratio that
# no launch measured earns nothing.


# %% nbgrader={"grade": false, "grade_id": "coalescing_slowdown", "locked": false, "schema_version": 3, "solution": true, "task": false}
def coalescing_slowdown(n=8192):
    """Time of transpose_naive on an n x n float32 matrix over a stride-1 strided_copy of it.

    Both run on device arrays after a warm-up; on a GPU the median of several CUDA-event-timed
    samples, in the simulator one perf_counter-timed launch. n: an integer >= 1 (ValueError
    below 1, TypeError for non-integers). Returns a Python float (> 1: the strided write is slower).
    """
    ### BEGIN SOLUTION
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"n must be an integer matrix side, got {n!r} ({type(n).__name__})")
    if n < 1:
        raise ValueError(f"n must be at least 1 (the side of an n x n matrix), got {n}")
    n = int(n)
    src = cuda.to_device(np.random.default_rng(0).standard_normal((n, n)).astype(np.float32))
    dst = cuda.device_array((n, n), dtype=np.float32)
    flat_src, flat_dst = src.reshape(n * n), dst.reshape(n * n)
    t_grid, t_block = ((n + 31) // 32, (n + 7) // 8), (32, 8)
    c_blocks, c_tpb = launch_config(n * n)

    def naive():
        transpose_naive[t_grid, t_block](src, dst)

    def contiguous():
        strided_copy[c_blocks, c_tpb](flat_src, flat_dst, 1)

    def median_ms(launch):
        launch()  # warm-up: compiles on the first call
        cuda.synchronize()  # grader: public
        if not ON_GPU:
            t0 = time.perf_counter()  # grader: public
            launch()
            return (time.perf_counter() - t0) * 1e3
        times = []
        for _ in range(5):
            start, end = cuda.event(), cuda.event()  # grader: public
            start.record()  # grader: public
            for _ in range(10):
                launch()
            end.record()  # grader: public
            end.synchronize()  # grader: public
            times.append(cuda.event_elapsed_time(start, end) / 10)
        return float(np.median(times))

    return float(median_ms(naive) / max(median_ms(contiguous), 1e-9))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_coalescing_slowdown", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
def _check_coalescing_slowdown():
    _ratio = coalescing_slowdown(16)
    assert isinstance(_ratio, float) and math.isfinite(_ratio) and _ratio > 0, (
        f"coalescing_slowdown must return a positive float, got {_ratio!r}"
    )
    expect_raises(ValueError, coalescing_slowdown, 0)
    expect_raises(TypeError, coalescing_slowdown, 16.0)
    print(f"coalescing_slowdown: self-checks passed (n=16 ratio {_ratio:.2f}, too small to mean much)")


_check_coalescing_slowdown()
del _check_coalescing_slowdown


# %% [markdown]
# ### Demo: the three kernels side by side
#
# On a GPU this times the contiguous copy, the naive transpose and the tiled one on an 8192 x 8192
# float32 matrix (268 MB read and written each) and reports their useful bandwidth. Expect the
# naive transpose well below the copy and the tiled one close to it. In the simulator it checks
# the results on a 48 x 48 matrix and shows no timings.

# %% tags=["demo"]
n = TRANSPOSE_N
host = np.random.default_rng(3).standard_normal((n, n)).astype(np.float32)
d_src, d_dst = cuda.to_device(host), cuda.device_array((n, n), dtype=np.float32)
tiles = ((n + TILE - 1) // TILE, (n + TILE - 1) // TILE)
runs = {
    "contiguous copy": lambda: strided_copy[launch_config(n * n)](
        d_src.reshape(n * n), d_dst.reshape(n * n), 1
    ),
    "transpose_naive": lambda: transpose_naive[((n + 31) // 32, (n + 7) // 8), (32, 8)](
        d_src, d_dst
    ),
    "transpose_tiled": lambda: transpose_tiled[tiles, (TILE, 1)](d_src, d_dst),
}
for label, run in runs.items():
    run()
    cuda.synchronize()
    want = host if label == "contiguous copy" else host.T
    np.testing.assert_array_equal(d_dst.copy_to_host(), want, err_msg=label)
    if ON_GPU:
        start, end = cuda.event(), cuda.event()
        start.record()
        for _ in range(20):
            run()
        end.record()
        end.synchronize()
        per_launch = cuda.event_elapsed_time(start, end) / 20
        gbs = effective_bandwidth_gbs(2 * host.nbytes, per_launch)
        print(f"{label:16s} {per_launch:7.3f} ms  {gbs:7.1f} GB/s")
if not ON_GPU:
    print(f"all three kernels correct on a {n} x {n} matrix (simulator: no timings shown)")
print(f"coalescing_slowdown({n}) = {coalescing_slowdown(n):.2f}")

# %% [markdown]
# ## §9 Shared memory that raises intensity: a tiled matrix multiply
#
# The tiled transpose used shared memory to *reorder* accesses: every element still crossed
# HBM exactly once each way, so its intensity did not change. The bigger use of shared memory is
# *reuse*: load a value from HBM once and use it many times from on-chip memory. That is the
# whole argument of a tiled matrix multiply, and, one level up, of FlashAttention.
#
# Take $C = A B$ with $A$ of shape $M \times K$, $B$ of shape $K \times N$, all float32 (4
# bytes). Each of the $MN$ outputs is a dot product of length $K$: $2K$ FLOPs (one multiply and
# one add per term).
#
# **Naive.** One thread per output reads its row of $A$ and its column of $B$ straight from
# global memory: $2K$ loads of 4 bytes for $2K$ FLOPs, an intensity of
# $2K / (8K) = 0.25$ FLOP/byte (counting every load as HBM traffic, as if no cache helped).
# On the T4's FP32 roofline (8.1 TFLOP/s, 320 GB/s) that caps the kernel at
# $0.25 \times 320 = 80$ GFLOP/s, 1% of the FP32 peak.
#
# **Tiled.** Cut $C$ into tiles of $T \times T$ outputs, one block per tile. The block walks
# along $K$ in steps of $T$: at each step it copies a $T \times T$ tile of $A$ and one of $B$
# into shared memory ($2T^2$ loads from global memory), waits at a barrier, and then does all
# $T \cdot T \cdot T$ multiply-adds those two tiles allow ($2T^3$ FLOPs) from shared memory,
# then waits again before the next step overwrites the tiles. Per step:
#
# $$ I(T) = \frac{2T^3\ \text{FLOPs}}{2T^2 \times 4\ \text{bytes}} = \frac{T}{4}\ \text{FLOP/byte} $$
#
# Each value loaded from HBM now serves $T$ multiply-adds instead of one: the intensity grows
# linearly with the tile. $T = 1$ is the naive kernel again. With $T = 32$ it is 8 FLOP/byte,
# a 32-fold gain, and the memory roof is 32 times higher. The tile is limited by shared memory
# ($2T^2 \times 4$ bytes per block: 8 KB at $T = 32$) and by registers; production GEMMs also
# tile in registers to climb further, past the ridge.
#
# **Exercise.** Write `tiled_intensity(tile, itemsize=4)`: the FLOPs per byte of global memory
# of the tiled multiply above with a `tile x tile` tile of elements of `itemsize` bytes, as a
# Python `float`. The FLOPs per step are `2 * tile**3` and the bytes `2 * tile**2 * itemsize`.
# `tile=1` is the naive kernel: `tiled_intensity(1)` is 0.25. Both arguments are integers
# `>= 1`; an integer below 1 raises `ValueError`, and a non-integer (`32.0`, `True`) raises
# `TypeError`.


# %% nbgrader={"grade": false, "grade_id": "tiled_intensity", "locked": false, "schema_version": 3, "solution": true, "task": false}
def tiled_intensity(tile, itemsize=4):
    """FLOP/byte of global memory of a matrix multiply tiled tile x tile in shared memory.

    tile (elements per side) and itemsize (bytes per element) are integers >= 1 (ValueError
    below 1, TypeError for non-integers). Returns a Python float: 2 tile^3 FLOPs over
    2 tile^2 itemsize bytes per step along K.
    """
    ### BEGIN SOLUTION
    for name, value in (("tile", tile), ("itemsize", itemsize)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    flops = 2 * int(tile) ** 3
    nbytes = 2 * int(tile) ** 2 * int(itemsize)
    return flops / nbytes
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_tiled_intensity", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
def _check_tiled_intensity():
    assert tiled_intensity(1) == 0.25, "tile 1 is the naive kernel: 2 FLOPs per 8 bytes"
    assert tiled_intensity(32) == 8.0, "a 32 x 32 tile: 32 / 4 = 8 FLOP/byte"
    assert tiled_intensity(16, itemsize=2) == 8.0, "fp16 elements halve the bytes"
    assert type(tiled_intensity(8)) is float, "return a Python float"
    _gain = tiled_intensity(TILE) / tiled_intensity(1)
    assert _gain == TILE, f"the intensity gain of a TILE x TILE tile should be TILE, got {_gain}"
    expect_raises(ValueError, tiled_intensity, 0)
    expect_raises(TypeError, tiled_intensity, 32.0)
    print(f"tiled_intensity: self-checks passed (gain of a {TILE} x {TILE} tile: {_gain:.0f}x)")


_check_tiled_intensity()
del _check_tiled_intensity


# %% [markdown]
# **Exercise.** Write `matmul_naive(a, b, c)`: a 2-D kernel where thread `(x, y) =
# cuda.grid(2)` computes `c[y, x]`, the dot product of row `y` of `a` with column `x` of `b`,
# accumulating in a local variable and writing `c[y, x]` once. Start the sum as
# `numba.float32(0.0)`: a bare `0.0` is a float64 to Numba and turns the whole loop into
# float64 arithmetic, which a T4 runs at 1/32 of its FP32 rate. `a` is `M x K`, `b` is `K x N`,
# `c` is `M x N`, all float32; `x` runs along the columns of `c` (so a warp's reads of `b` and
# writes of `c` are neighbours). Bounds-check both coordinates: the grader launches it with
# several block shapes on sizes that are not multiples of the block, compares with NumPy's
# `a @ b` to a relative tolerance of 1e-4 (of `abs(a) @ abs(b)`, the size of the terms each
# sum adds up, since float32 sums of mixed signs can cancel), and compiles it for the T4 with
# the signature `void(float32[:, :], float32[:, :], float32[:, :])`.


# %% nbgrader={"grade": false, "grade_id": "matmul_naive", "locked": false, "schema_version": 3, "solution": true, "task": false}
@cuda.jit
def matmul_naive(a, b, c):
    """Kernel: c[y, x] = sum over k of a[y, k] * b[k, x], one output per thread (2-D launch).

    a is M x K, b is K x N, c is M x N (float32). Every operand is read from global memory.
    """
    ### BEGIN SOLUTION
    x, y = cuda.grid(2)
    if y < c.shape[0] and x < c.shape[1]:
        acc = numba.float32(0.0)
        for k in range(a.shape[1]):
            acc += a[y, k] * b[k, x]
        c[y, x] = acc
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_matmul_naive", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
def _check_matmul_naive():
    _rng = np.random.default_rng(5)
    _a = _rng.standard_normal((19, 11)).astype(np.float32)
    _b = _rng.standard_normal((11, 13)).astype(np.float32)
    _c = np.full((19, 13), np.nan, dtype=np.float32)
    matmul_naive[(2, 3), (8, 8)](_a, _b, _c)  # 16 x 24 threads for 13 columns x 19 rows
    expect_written("matmul_naive", _c)
    np.testing.assert_allclose(_c, _a @ _b, rtol=1e-4, atol=1e-5, err_msg="matmul_naive: c != a @ b")
    print("matmul_naive: self-checks passed")


_check_matmul_naive()
del _check_matmul_naive


# %% [markdown]
# **The tiled kernel.** As in the transpose, each block is one warp of `TILE` lanes and owns one
# `TILE x TILE` tile of `c`: block `(bx, by)` the rows from `by * TILE` and the columns from
# `bx * TILE`, and lane `lane = cuda.threadIdx.x` one column of that tile, so it keeps `TILE`
# running sums, one per row, in `acc = cuda.local.array(TILE, numba.float32)` (set them to zero
# first). Then, for each step `k0 = 0, TILE, 2 * TILE, ...` along `K`:
#
# 1. every lane copies column `lane` of the `TILE x TILE` tile of `a` that starts at row
#    `by * TILE`, column `k0` (element `[r, lane]` of the shared tile is `a[by * TILE + r, k0 +
#    lane]`) and column `lane` of the tile of `b` that starts at row `k0`, column `bx * TILE`,
#    into two `cuda.shared.array((TILE, TILE), numba.float32)` tiles. An element outside the
#    matrix is stored as 0, so the partial tiles at the edges add nothing to the sums;
# 2. `cuda.syncthreads()`, so both tiles are complete;
# 3. for each `k` of the tile and each row `r`, `acc[r] += a_tile[r, k] * b_tile[k, lane]`: the
#    `TILE x TILE` multiply-adds of this step, all from shared memory (every lane of the warp
#    reads the same `a_tile[r, k]`, a broadcast, and neighbouring `b_tile` elements, so there
#    are no bank conflicts and no padding is needed);
# 4. `cuda.syncthreads()` again, so that no lane overwrites a tile the others are still reading.
#
# Finally each lane writes its `TILE` sums into its column of the tile of `c`, skipping rows
# and columns outside `c`. Every thread must reach both barriers on every step, so keep the
# bounds checks inside the loops, around the loads and stores only.
#
# **Exercise.** Write `matmul_tiled(a, b, c)`, same contract as `matmul_naive` (any `M`, `N`,
# `K`, including sizes that are not multiples of `TILE`; float32; compared with `a @ b` to a
# relative tolerance of 1e-4), launched with blocks of exactly `(TILE, 1)` threads and a grid of
# `(ceil(N / TILE), ceil(M / TILE))` blocks. The grader compiles it for the T4 with the
# signature `void(float32[:, :], float32[:, :], float32[:, :])`, and profiles it with
# `M = N = K = 32`: its accesses to global memory (loads, stores and atomics of every array,
# `c` included) must be at most `1.25 / TILE` of the `2 x M x N x K` loads that the naive kernel
# makes, plus one store per element of `c` (each element of a tile is loaded once and reused
# `TILE` times from shared memory, and each sum is kept in a register and stored once), every
# request that loads from global memory must touch the ideal number of sectors, and every
# block must pass at least one barrier. A padded tile or a kernel written for 2-D blocks earns
# the points too; tiles filled and then bypassed do not, nor sums accumulated in `c` itself
# (with `+=` or atomics: every step reads and writes `c` again).
# As in the transpose of §8, load each column into a `cuda.local.array` first and then store it
# to the tile, so that a lane has 32 loads in flight (the reference does; nothing grades it, but
# on a GPU it halves the time of a step).


# %% nbgrader={"grade": false, "grade_id": "matmul_tiled", "locked": false, "schema_version": 3, "solution": true, "task": false}
@cuda.jit
def matmul_tiled(a, b, c):
    """Kernel: c = a @ b through shared-memory tiles; launch with (TILE, 1) threads per block.

    Grid: (ceil(N / TILE), ceil(M / TILE)) blocks. Lane l keeps the TILE sums of column l of
    its block's tile of c; each step along K stages a TILE x TILE tile of a and of b.
    """
    ### BEGIN SOLUTION
    a_tile = cuda.shared.array((TILE, TILE), numba.float32)
    b_tile = cuda.shared.array((TILE, TILE), numba.float32)
    acc = cuda.local.array(TILE, numba.float32)  # grader: public
    lane = cuda.threadIdx.x
    row0 = cuda.blockIdx.y * TILE
    col = cuda.blockIdx.x * TILE + lane
    for r in range(TILE):
        acc[r] = 0.0
    # one column of a tile, held in registers (the text above names this line)
    held = cuda.local.array(TILE, numba.float32)  # grader: public
    for k0 in range(0, a.shape[1], TILE):
        for r in range(TILE):  # TILE independent loads of a, then their stores to shared memory
            held[r] = 0.0
            if row0 + r < a.shape[0] and k0 + lane < a.shape[1]:
                held[r] = a[row0 + r, k0 + lane]
        for r in range(TILE):
            a_tile[r, lane] = held[r]
        for r in range(TILE):  # the same for b
            held[r] = 0.0
            if k0 + r < b.shape[0] and col < b.shape[1]:
                held[r] = b[k0 + r, col]
        for r in range(TILE):
            b_tile[r, lane] = held[r]
        cuda.syncthreads()
        for k in range(TILE):
            value = b_tile[k, lane]
            for r in range(TILE):
                acc[r] += a_tile[r, k] * value  # grader: public
        cuda.syncthreads()
    if col < c.shape[1]:
        for r in range(TILE):
            if row0 + r < c.shape[0]:
                c[row0 + r, col] = acc[r]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_matmul_tiled", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
def _check_matmul_tiled():
    _rng = np.random.default_rng(6)
    _a = _rng.standard_normal((35, 37)).astype(np.float32)
    _b = _rng.standard_normal((37, 33)).astype(np.float32)
    _c = np.full((35, 33), np.nan, dtype=np.float32)
    matmul_tiled[(2, 2), (TILE, 1)](_a, _b, _c)  # 2 x 2 tiles of 32 cover 33 columns x 35 rows
    expect_written("matmul_tiled", _c)
    np.testing.assert_allclose(_c, _a @ _b, rtol=1e-4, atol=1e-4, err_msg="matmul_tiled: c != a @ b")
    print("matmul_tiled: self-checks passed")


_check_matmul_tiled()
del _check_matmul_tiled


# %% [markdown]
# ### Reuse, counted
#
# `grader profile gpu_fundamentals matmul_naive matmul_tiled` runs both on `32 x 32 @ 32 x 32`.
# Every request of both kernels is coalesced (the naive kernel's reads of `a` are even
# broadcasts: one sector for the whole warp), so sectors per request cannot tell them apart.
# The bytes can: the naive kernel loads 163,840 B from global memory, the tiled one 8,192 B, and
# its 1,024 requests to `a_tile` are served from shared memory instead. The element loads are
# `2 x 32 x 32 x 32 = 65,536` against `65,536 / 32 = 2,048`, exactly the factor `TILE` that
# `tiled_intensity` predicts (the bytes differ by 20, not 32, because the naive kernel's
# broadcast reads of `a` already share their sectors across a warp).

# %% [markdown]
# ## §10 Measure it: your kernels on the T4's roofline
#
# A roofline is a prediction; this section puts your own kernels on it. For each kernel, the
# x-coordinate is the intensity your byte count gives (`1 / 12` for the float32 vector add,
# `tiled_intensity(1)` and `tiled_intensity(TILE)` for the two matrix multiplies), and the
# y-coordinate is what the kernel achieved: FLOPs divided by its measured time
# (`2 * M * N * K` for a matrix multiply, `n` for the vector add).
#
# **Pick the roof your kernels run under.** These kernels do ordinary FP32 arithmetic on the
# CUDA cores, never touching the tensor cores, so their roof is the T4's FP32 peak, 8.1 TFLOP/s
# (`fp32_tflops` in course.toml), and their ridge is `8.1e12 / 320e9`, about 25 FLOP/byte: far
# left of the 203 of the fp16 tensor-core roof that §3 and M9 use. The plot draws the FP16
# tensor roof too, faint, to show how much higher it is, but a kernel that does not use tensor
# cores can never reach it, and its ridge says nothing about these kernels.
#
# Expect to land below the roofs. The datasheet figures are peaks, not what a card sustains: a
# T4 is held to 70 W and its clock drops under a long GEMM, and no kernel streams at the full
# 320 GB/s. So the cell also measures a practical roof on the same GPU, in the same arithmetic:
# the bandwidth of your vector add and the FP32 FLOP/s of PyTorch's own 4096 x 4096 FP32 matrix
# multiply (TF32 switched off, so it too stays on the FP32 units), and draws the **practical
# ridge**, their ratio, beside the datasheet FP32 ridge. A kernel between the two ridges is
# compute-bound on paper but bandwidth-bound in practice. Expect the naive multiply to sit
# *above* its roof: its operands are re-read from the L1 and L2 caches, which the byte count
# ignores, so its real HBM traffic is lower than `tiled_intensity(1)` assumes.
#
# Without a GPU nothing can be measured: the cell draws the points your formulas *predict*
# (each kernel at its FP32 roof, `attainable_flops` of its intensity), labels the plot as a
# prediction, and the practical roof is left out.

# %% tags=["demo"]
import matplotlib.pyplot as plt

T4_FP32 = _hardware_table("T4")["fp32_tflops"] * 1e12
T4_FP16, T4_BW = peak_figures("T4")
MM_N = 2048 if ON_GPU else 64  # matrix side
points = {  # label: (intensity in FLOP/byte, FLOPs of one run)
    "vector_add": (1 / 12, VEC_N),
    "matmul_naive": (tiled_intensity(1), 2 * MM_N**3),
    "matmul_tiled": (tiled_intensity(TILE), 2 * MM_N**3),
}
achieved = {}
practical = None
if ON_GPU:
    import torch

    def event_ms(run, repeat=10):
        run()
        cuda.synchronize()
        start, end = cuda.event(), cuda.event()
        start.record()
        for _ in range(repeat):
            run()
        end.record()
        end.synchronize()
        return cuda.event_elapsed_time(start, end) / repeat

    rng = np.random.default_rng(6)
    va, vb = (cuda.to_device(rng.standard_normal(VEC_N).astype(np.float32)) for _ in range(2))
    vc = cuda.device_array_like(va)
    ma, mb = (
        cuda.to_device(rng.standard_normal((MM_N, MM_N)).astype(np.float32)) for _ in range(2)
    )
    mc = cuda.device_array((MM_N, MM_N), dtype=np.float32)
    grid = ((MM_N + 31) // 32, (MM_N + 7) // 8)
    tiles = ((MM_N + TILE - 1) // TILE, (MM_N + TILE - 1) // TILE)
    times = {
        "vector_add": event_ms(lambda: vector_add[launch_config(VEC_N)](va, vb, vc)),
        "matmul_naive": event_ms(lambda: matmul_naive[grid, (32, 8)](ma, mb, mc)),
        "matmul_tiled": event_ms(lambda: matmul_tiled[tiles, (TILE, 1)](ma, mb, mc)),
    }
    for label, ms in times.items():
        achieved[label] = points[label][1] / (ms * 1e-3)
        print(f"{label:13s} {ms:8.3f} ms  {achieved[label] / 1e9:8.1f} GFLOP/s")
    sustained_bw = effective_bandwidth_gbs(3 * 4 * VEC_N, times["vector_add"]) * 1e9
    torch.backends.cuda.matmul.allow_tf32 = False  # FP32 on the FP32 units, like your kernels
    ta = torch.randn(4096, 4096, device="cuda", dtype=torch.float32)
    torch_ms = event_ms(lambda: torch.matmul(ta, ta))
    sustained_fp32 = 2 * 4096**3 / (torch_ms * 1e-3)
    practical = ridge_point(sustained_fp32, sustained_bw)
    print(
        f"practical roofs: {sustained_bw / 1e9:.0f} GB/s (your vector_add), "
        f"{sustained_fp32 / 1e12:.2f} TFLOP/s (torch FP32 matmul): ridge {practical:.1f} FLOP/byte"
    )
else:
    for label, (intensity, _) in points.items():
        achieved[label] = attainable_flops(intensity, T4_FP32, T4_BW)  # a prediction
intensities = np.logspace(-2, 3, 300)
fp32_ridge = ridge_point(T4_FP32, T4_BW)
fig, ax = plt.subplots(figsize=(9, 5.5))
ax.loglog(
    intensities,
    attainable_flops(intensities, T4_FP32, T4_BW) / 1e9,
    "k-",
    label=f"T4 datasheet, FP32 ({T4_FP32 / 1e12:.1f} TFLOP/s, {T4_BW / 1e9:.0f} GB/s)",
)
ax.loglog(
    intensities,
    attainable_flops(intensities, T4_FP16, T4_BW) / 1e9,
    "k:",
    alpha=0.35,
    label=f"T4 FP16 tensor roof ({T4_FP16 / 1e12:.0f} TFLOP/s): not for FP32 kernels",
)
ax.axvline(fp32_ridge, color="gray", ls=":")
ax.text(fp32_ridge * 1.1, 30, f"FP32 ridge ~ {fp32_ridge:.0f}", color="gray")
if practical is not None:
    ax.loglog(
        intensities,
        attainable_flops(intensities, sustained_fp32, sustained_bw) / 1e9,
        "-",
        color="tab:red",
        alpha=0.6,
        label="T4 practical FP32 roof (measured here)",
    )
    ax.axvline(practical, color="tab:red", ls=":")
    ax.text(practical * 1.1, 60, "practical ridge", color="tab:red")
for label, (intensity, _) in points.items():
    ax.scatter(intensity, achieved[label] / 1e9, s=70, zorder=3, label=label)
kind = "measured" if ON_GPU else "PREDICTED (no GPU: each kernel drawn at its FP32 roof)"
ax.set_title(f"Your FP32 kernels on the T4 roofline: {kind}")
ax.set_xlabel("arithmetic intensity (FLOP/byte of global memory)")
ax.set_ylabel("GFLOP/s")
ax.grid(True, which="both", alpha=0.3)
ax.legend(loc="lower right", fontsize=8.5)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## §11 What this explains about LLMs
#
# **Why FlashAttention is faster even though it does more arithmetic.** Standard attention writes
# the $n \times n$ score matrix to HBM, reads it back for the softmax, writes the probabilities, and
# reads them again to multiply by $V$. All of that is $O(n^2)$ HBM traffic for operations that sit
# far left of the ridge. FlashAttention cuts $Q$, $K$ and $V$ into tiles small enough for shared
# memory, keeps a running ("online") softmax as it walks along the keys, and never writes the score
# matrix to HBM. It does somewhat more arithmetic (the backward pass recomputes scores instead of
# storing them) but moves far fewer bytes, and on a memory-bound operation fewer bytes means less
# time. The FlashAttention paper (Dao et al. 2022) bounds it: for a sequence of $N$ tokens, head
# dimension $d$ and $M$ numbers of on-chip memory ($d \le M \le Nd$), standard attention moves
# $\Theta(Nd + N^2)$ numbers through HBM and FlashAttention $\Theta(N^2 d^2 / M)$. A
# $\Theta$ hides its constants, so count them, per head, at $N = 4096$, $d = 128$ and an H100
# SM's 228 KiB holding $M = 116{,}736$ bf16 numbers:
#
# * **standard attention** reads $Q$ and $K$ ($2Nd$), writes $S = QK^T$ ($N^2$), reads it for the
#   softmax and writes $P$ ($2N^2$), reads $P$ and $V$ ($N^2 + Nd$) and writes $O$ ($Nd$):
#   $4Nd + 4N^2 \approx 69.2$ million numbers;
# * **FlashAttention's Algorithm 1** takes key/value blocks of $B_c = \lceil M / 4d \rceil = 228$
#   rows, so $T_c = \lceil N / B_c \rceil = 18$ of them. $K$ and $V$ are read once ($2Nd$); for
#   each of the 18 key blocks the inner loop reads all of $Q$ and of the running output $O$ and
#   writes $O$ back ($3Nd$), with the softmax's running maximum and sum ($4N$):
#   $2Nd + T_c (3Nd + 4N) \approx 29.7$ million numbers.
#
# That is 2.3 times fewer, not an order of magnitude, and the ratio does **not** grow with $N$:
# both counts are quadratic in $N$ (the inner loop rereads $Q$ and $O$ once per key block), so
# it tends to a constant, $4N^2 / (3N^2 d / B_c) \approx M / 3d^2 \approx 2.4$, of the order of
# $M/d^2$ as the bound says. The decisive wins are elsewhere: the $N \times N$ matrix never
# exists in HBM, so the memory attention needs grows as $O(N)$ instead of $O(N^2)$ (at
# $N = 4096$ one head's score matrix alone is 34 MB in bf16), and the whole computation is one
# fused kernel.
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
# Because it is bandwidth-bound, decode is judged by its **MBU**, model bandwidth utilisation:
# the bytes a step must move, divided by the step's time and the peak bandwidth (M9 computes
# it). Its FLOP utilisation is small by nature, and how small depends on the batch: for
# Llama-3-8B on an H100 at 2,048 tokens of context, even at the roofline's speed, about 0.4% at
# batch 1, 4.5% at batch 16 and 10.8% at batch 64. The often-quoted "decode tops out at 5 to 10%
# MFU" is a statement about moderate batches like these, not about one sequence.
#
# **What an MFU of 45% means.** Model FLOPs utilisation divides the FLOP/s a training or
# inference run actually spends on the model's own maths (counted from the model, about 6 x
# params per token for training) by the hardware's peak. Read it with this session's ideas: the
# peak assumes every cycle is a tensor-core GEMM at full occupancy, so everything else pulls the
# number down. Normalisations, activations and softmax sit left of the ridge and run at memory
# speed (§3); reductions and softmax cannot use the tensor cores at all; kernels with too few
# resident warps leave the tensor cores waiting on memory (§5); and the GPU idles whenever it
# waits: for the next kernel launch, for another GPU's gradients, for the next batch of input
# data. Large, well-tuned training runs report roughly 40 to 60%. Treat that range as the mark of
# a good run; 100% is not a realistic target.

# %% [markdown]
# ## Done?
#
# Re-run the whole notebook (*Runtime → Restart and run all*) and check that every self-check
# prints `passed`. Then, from the root of your repository (the folder holding `course.toml`), run
# the public tests:
#
# ```
# pytest tests/public/gpu_fundamentals
# ```
#
# They grade your `exercises/gpu_fundamentals` notebook in the simulator (`grader check
# gpu_fundamentals` does the same as a table, and, when your machine has the CUDA compiler, also
# runs the compile check for the T4 and says whether it passed). Commit and open your
# pull request; the grader then runs the public and hidden tests on your functions, in the
# simulator and, where a GPU runner is available, on real hardware with the timed tests above.
