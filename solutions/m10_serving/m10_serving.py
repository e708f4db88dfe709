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
# # S5.3 Serving at scale: what a serving team decides after "decode is bandwidth-bound"
#
# M9 ended on one GPU, one model, one batch: a decode step reads every weight and every cached
# key and value once, so its time is bytes over bandwidth. A serving team lives one level up. It
# lays the KV cache out in memory and pages it, admits requests only when their cache will fit,
# splits a model too big for one GPU across several and pays for the all-reduces, serves mixtures
# of experts whose weights are mostly idle, guesses tokens ahead with a draft model, and in the end
# is judged on requests: how long a user waits for the first token and between tokens, at the
# load the service actually sees. This notebook is the new hire's tour of those decisions, each
# with the number that settles it.
#
# | § | idea | you write |
# |---|---|---|
# | 1 | the KV cache's layout decides whether a warp's reads coalesce; pages cost sectors only when they are small | `sectors_per_request`, `scores_bhsd`, `scores_bshd`, `scores_paged` |
# | 2 | KV memory as an engine manages it: blocks, admission, prefix caching, preemption | `kv_blocks`, `admit`, `prefix_cache_savings`, `preemption` |
# | 3 | tensor parallelism: bytes per GPU, two all-reduces a layer, when they stop hiding | `min_tp_degree`, `allreduce_s`, `tp_tpot`, `allreduce_exposed_batch` |
# | 4 | mixture of experts: resident against active weights, experts touched by a batch | `moe_params`, `experts_touched`, `moe_crossover_batch` |
# | 5 | speculative decoding with an acceptance rate | `expected_tokens`, `spec_speedup`, `best_draft_length` |
# | 6 | requests, not batches: Little's law, queueing, goodput under latency targets | `decode_tpot`, `arrival_times`, `ttfts`, `p99`, `goodput` |
#
# **How to work.** Fill in every cell that says `YOUR CODE HERE`, then run the self-check cell
# right after it. The self-checks are public and quick; the grader runs more tests, with inputs
# it draws at grading time, so make your functions correct in general rather than just for the
# numbers you see here.
#
# ### Rules the grader holds you to
#
# **Errors: the chapter's one convention.**
#
# * An argument of the wrong *type* raises `TypeError`: a string where a number belongs; a float
#   where an integer (a count) is required, `2.0` included; a `bool` where a number belongs. An
#   integer may be a Python `int` or a NumPy integer.
# * A value of the right type that is out of range raises `ValueError`: negative, NaN, infinite,
#   zero where the docstring asks for a positive number, a probability outside `[0, 1]`, a
#   string that is not one of the choices listed.
# * The grader's bad calls have one fault each, so the order of your checks never costs a point.
#   The message names the argument and says what was expected.
#
# The helper cell after the setup gives you `_count`, `_positive`, `_non_negative` and
# `_probability`, which raise exactly these errors; use them.
#
# **Return types** are the plain Python ones each docstring names (`int`, `float`, `bool`, `str`,
# `tuple`, `list` or `None`). The grader compares floats with a relative tolerance of `1e-9`
# and integers, strings and booleans exactly.
#
# **Kernels** must also compile for the course GPU, the T4 (compute capability 7.5): the grader
# compiles each to PTX, and a kernel that does not compile earns none of its points even if the
# simulator ran it. Inside a kernel use only its arguments, numbers, array indexing and shapes,
# `cuda.*` (`cuda.atomic.add` included) and `math`, and module-level integer constants such as
# `TPB`.
#
# **No GPU? No problem.** Without a GPU the kernels run in Numba's CUDA *simulator*: exact, but
# slow, so every example here is small. Cells tagged `demo` are for you to look at (plots at
# full sizes); the grader skips them. The GPU figures come from `course.toml`'s `[hardware]`
# tables (their copy is written into the setup cell below when the course is released).

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


# %% nbgrader={"grade": false, "grade_id": "serving_helpers", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Argument checks for this notebook's functions: each returns the value as a plain Python number
# or raises the error the rules above ask for, with a message naming the argument.


def _count(name, value, least=0):
    """`value` as an int: TypeError unless it is an integer (not a bool), ValueError if < least."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if least > value:
        raise ValueError(f"{name} must be {least} or more, got {value!r}")
    return int(value)


def _number(name, value):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return number


def _positive(name, value):
    """`value` as a float: TypeError unless a number, ValueError unless finite and > 0."""
    number = _number(name, value)
    if number <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return number


def _non_negative(name, value):
    """`value` as a float: TypeError unless a number, ValueError unless finite and >= 0."""
    number = _number(name, value)
    if number < 0:
        raise ValueError(f"{name} must be at least 0, got {value!r}")
    return number


def _probability(name, value):
    """`value` as a float: TypeError unless a number, ValueError outside [0, 1]."""
    number = _number(name, value)
    if not 0 <= number <= 1:
        raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
    return number


def _hardware_figure(gpu, key):
    """One figure of course.toml's [hardware.<gpu>] table (None where the card lacks it)."""
    return _hardware_table(gpu).get(key)


# %% [markdown]
# ## §1 The KV cache's layout, a warp's reads, and pages
#
# A decode step's attention starts with the *scores*: for one sequence `b` and one head `h`, the
# new token's query `q[b, h, :]` (a vector of `head_dim` numbers) is dotted with the key of every
# cached position `s`, `scores[b, h, s] = sum over d of q[b, h, d] * K[b, h, s, d]`. The keys are
# the bytes; the query is read once. How fast those bytes arrive depends on whether the 32 lanes
# of a warp ask for neighbouring addresses: the memory system moves whole 32-byte *sectors*, so
# a warp whose lanes read 32 consecutive float32 values moves 4 sectors (128 bytes, all used),
# and a warp whose lanes each read from a different place moves up to 32.
#
# An engine can lay its key cache out two natural ways:
#
# * **(batch, head, seq, dim)**: one head's keys for all positions are one contiguous slab of
#   `seq * head_dim` numbers;
# * **(batch, seq, head, dim)**: one position's keys for all heads are contiguous, so one head's
#   rows of `head_dim` numbers lie `heads * head_dim` numbers apart.
#
# Which one coalesces depends on how threads are mapped to the work. The mapping of this section
# (write your kernels to it; the grader profiles them under it): **launch on a grid of
# `(ceil(seq * head_dim / TPB), batch * heads)` blocks of `TPB` threads; block `(x, y)` works on
# sequence `b = y // heads` and head `h = y % heads`; its thread `t` takes element
# `e = x * TPB + t` of that head's keys read as one `(seq, head_dim)` slab, so position
# `s = e // head_dim` and dim `d = e % head_dim`; a thread with `s >= seq` does nothing; every
# other thread adds `q[b, h, d] * K[position s, dim d]` into `scores[b, h, s]` with
# `cuda.atomic.add`.** The grader passes `scores` filled with zeros, so add into it; `head_dim`
# threads add into each score, and their atomic adds are what make the sum.
#
# Under that mapping a warp's 32 lanes read 32 consecutive elements of the slab. In
# (batch, head, seq, dim) the slab *is* contiguous: one coalesced request. In
# (batch, seq, head, dim) it is cut into *runs* of `head_dim` numbers, a row per position, and a
# warp spanning several rows touches each row's sectors separately. Count it: a warp reading 32
# consecutive elements of a slab stored in contiguous runs of `run` elements (a power of two,
# each run starting at a multiple of its own size, runs of different positions at least 32 bytes
# apart) spans `max(1, 32 // run)` runs, and each run's part of the request covers
# `ceil(min(run, 32) * itemsize / 32)` sectors. For float32 that is 4 sectors (the ideal) once a
# run is at least 8 numbers, 8 sectors for runs of 4, 16 for runs of 2 and 32 for runs of 1.
#
# So for this mapping the (batch, head, seq, dim) layout always coalesces, and
# (batch, seq, head, dim) does only when a row of `head_dim` keys fills a sector: at the
# `head_dim = 128` of real models either layout moves whole sectors. The layout's cost shows in
# other mappings: the one that comes first to mind, one thread per position looping over `d`,
# makes each lane read a different row and costs 32 sectors a request in *both* layouts
# (real decode kernels spread a position over a group of lanes for exactly that reason).
#
# **Exercise.** Write `sectors_per_request(run, itemsize=4)`: the sectors one warp's request
# moves when its 32 lanes read 32 consecutive elements of `itemsize` bytes stored in contiguous
# runs of `run` elements, by the rule above, as a Python `int`. `run` and `itemsize` are powers of
# two (`run` at least 1, `itemsize` from 1 to 16): `ValueError` for another integer.


# %% nbgrader={"grade": false, "grade_id": "sectors_per_request", "locked": false, "schema_version": 3, "solution": true, "task": false}
def sectors_per_request(run, itemsize=4):
    """Sectors (32 bytes each) one warp request moves: 32 lanes read 32 consecutive elements of
    itemsize bytes that are stored in contiguous runs of `run` elements; an int.

    run: a power of two >= 1 (elements); itemsize: 1, 2, 4, 8 or 16 (bytes). TypeError for a
    non-integer (a bool too), ValueError for another value.
    """
    ### BEGIN SOLUTION
    run = _count("run", run, 1)
    itemsize = _count("itemsize", itemsize, 1)
    if run & (run - 1):
        raise ValueError(f"run must be a power of two, got {run}")
    if itemsize not in (1, 2, 4, 8, 16):
        raise ValueError(f"itemsize must be 1, 2, 4, 8 or 16 bytes, got {itemsize}")
    runs_per_warp = max(1, 32 // run)
    per_run = -(-min(run, 32) * itemsize // 32)
    return runs_per_warp * per_run
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_sectors_per_request", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
assert sectors_per_request(4096) == 4, "a contiguous slab: 32 float32 = 128 bytes = 4 sectors"
assert sectors_per_request(4) == 8, "rows of 4 float32 (16 bytes): 8 rows, a sector each"
assert sectors_per_request(1) == 32, "rows of one element: every lane its own sector"
assert sectors_per_request(8, itemsize=2) == 4, "rows of 8 fp16 (16 bytes): 4 rows, 4 sectors"
assert type(sectors_per_request(16)) is int, "sectors_per_request must return an int"
expect_raises(ValueError, sectors_per_request, 6)
expect_raises(TypeError, sectors_per_request, 4.0)
print("sectors_per_request: self-checks passed")

# %% [markdown]
# ### The kernels
#
# **Exercise.** Write the bodies of `scores_bhsd(q, k, scores)` and `scores_bshd(q, k, scores)`
# to the mapping above. `q` is float32 of shape `(batch, heads, head_dim)` and `scores` float32
# of shape `(batch, heads, seq)`, filled with zeros; `k` is float32 of shape
# `(batch, heads, seq, head_dim)` for `scores_bhsd` and `(batch, seq, heads, head_dim)` for
# `scores_bshd`. Take the sizes from the arrays' `.shape`. The grader launches each on the grid
# the mapping names, with `TPB` threads per block, on shapes whose `seq * head_dim` is not always
# a multiple of `TPB`, and compares every score with the exact dot product, allowing `1e-4` times
# the sum of the absolute values of its products. The PTX compile for the T4 uses the signature
# `void(float32[:, :, :], float32[:, :, :, :], float32[:, :, :])`.
#
# The grader also profiles each launch (the memory model of S5.1's §7, counting sectors per warp
# request): with `seq * head_dim` a multiple of 32, every request that reads `k` must move
# exactly `sectors_per_request(run)` sectors, with `run = 32` for `scores_bhsd` (its slab is
# contiguous and at least a warp long, and every run of 32 or more counts the same) and
# `run = head_dim` for `scores_bshd`, with `head_dim` a power of two; the head counts it draws
# keep the rows of different positions at least 32 bytes apart. A kernel that reads its keys another
# way, or more than once, does not match.

# %% nbgrader={"grade": false, "grade_id": "tpb", "locked": true, "schema_version": 3, "solution": false, "task": false}
TPB = 128  # threads per block of the scores kernels


# %% nbgrader={"grade": false, "grade_id": "scores_bhsd", "locked": false, "schema_version": 3, "solution": true, "task": false}
@cuda.jit
def scores_bhsd(q, k, scores):
    """Kernel: scores[b, h, s] += sum over d of q[b, h, d] * k[b, h, s, d] (k laid out
    (batch, head, seq, dim)), one element of the head's slab per thread, atomic adds.

    Grid (ceil(seq * head_dim / TPB), batch * heads), TPB threads; scores arrives zeroed.
    """
    ### BEGIN SOLUTION
    heads, seq, dim = k.shape[1], k.shape[2], k.shape[3]
    b = cuda.blockIdx.y // heads
    h = cuda.blockIdx.y % heads
    e = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    s = e // dim
    d = e % dim
    if s < seq:
        cuda.atomic.add(scores, (b, h, s), q[b, h, d] * k[b, h, s, d])
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "scores_bshd", "locked": false, "schema_version": 3, "solution": true, "task": false}
@cuda.jit
def scores_bshd(q, k, scores):
    """Kernel: scores[b, h, s] += sum over d of q[b, h, d] * k[b, s, h, d] (k laid out
    (batch, seq, head, dim)), one element of the head's slab per thread, atomic adds.

    Grid (ceil(seq * head_dim / TPB), batch * heads), TPB threads; scores arrives zeroed.
    """
    ### BEGIN SOLUTION
    seq, heads, dim = k.shape[1], k.shape[2], k.shape[3]
    b = cuda.blockIdx.y // heads
    h = cuda.blockIdx.y % heads
    e = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    s = e // dim
    d = e % dim
    if s < seq:
        cuda.atomic.add(scores, (b, h, s), q[b, h, d] * k[b, s, h, d])
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_scores_layouts", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
def _check_scores_layouts():
    rng = np.random.default_rng(0)
    batch, heads, seq, dim = 2, 3, 37, 8
    q = rng.standard_normal((batch, heads, dim)).astype(np.float32)
    k = rng.standard_normal((batch, heads, seq, dim)).astype(np.float32)
    want = np.einsum("bhd,bhsd->bhs", q, k)
    grid = (-(-seq * dim // TPB), batch * heads)
    for kernel, cache in ((scores_bhsd, k), (scores_bshd, np.ascontiguousarray(k.swapaxes(1, 2)))):
        scores = np.zeros((batch, heads, seq), np.float32)
        kernel[grid, TPB](q, cache, scores)
        np.testing.assert_allclose(scores, want, rtol=1e-4, atol=1e-4, err_msg=kernel.__name__)


_check_scores_layouts()
print("scores_bhsd, scores_bshd: self-checks passed")

# %% [markdown]
# ### Pages
#
# A contiguous cache must reserve each sequence's longest possible length up front, and most of
# that reservation sits empty. PagedAttention (Kwon et al., 2023, the idea behind vLLM) cuts the
# cache into fixed *pages* (vLLM calls them blocks) of `page_size` positions and gives each
# sequence a *block table*: its `j`-th page of positions lives in physical page
# `block_table[b, j]`, anywhere in one big pool. Memory is handed out a page at a time, so the
# waste is under one page per sequence. The price is in the reads: a head's slab is now
# contiguous only within a page. Here the pool `k_pages` has shape
# `(num_pages, heads, page_size, head_dim)`, so one head's keys in one page are one run of
# `page_size * head_dim` numbers, and position `s` of sequence `b` sits at
# `k_pages[block_table[b, s // page_size], h, s % page_size, d]`.
#
# By the rule above a page costs nothing in sectors once `page_size * head_dim * itemsize` is at
# least 128 bytes (a warp's whole float32 request); vLLM's default of 16 positions of
# `head_dim = 128` fp16 keys is 4 KiB a head, far past it. Only tiny pages split a warp's request.
#
# **Exercise.** Write the body of `scores_paged(q, k_pages, block_table, scores)`: the same
# scores, same mapping, with `seq = scores.shape[2]` and the keys found through the block table.
# `block_table` is int32 of shape `(batch, pages per sequence)`. The PTX compile uses the
# signature `void(float32[:, :, :], float32[:, :, :, :], int32[:, :], float32[:, :, :])`. The
# grader checks its scores as above, with block tables that scatter each sequence's pages over
# the pool, and profiles it: every request that reads `k_pages` must move exactly
# `sectors_per_request(page_size * head_dim)` sectors (the grader draws page sizes and head
# dims that are powers of two, and head counts that keep a head's pages at least 32 bytes
# apart).


# %% nbgrader={"grade": false, "grade_id": "scores_paged", "locked": false, "schema_version": 3, "solution": true, "task": false}
@cuda.jit
def scores_paged(q, k_pages, block_table, scores):
    """Kernel: scores[b, h, s] += sum over d of q[b, h, d] * K of position s, found at
    k_pages[block_table[b, s // page_size], h, s % page_size, d]; the mapping of §1.

    Grid (ceil(seq * head_dim / TPB), batch * heads), TPB threads; scores arrives zeroed.
    """
    ### BEGIN SOLUTION
    heads, page_size, dim = k_pages.shape[1], k_pages.shape[2], k_pages.shape[3]
    seq = scores.shape[2]  # grader: public (the notebook names it)
    b = cuda.blockIdx.y // heads
    h = cuda.blockIdx.y % heads
    e = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    s = e // dim
    d = e % dim
    if s < seq:
        page = block_table[b, s // page_size]
        cuda.atomic.add(scores, (b, h, s), q[b, h, d] * k_pages[page, h, s % page_size, d])
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_scores_paged", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
def _check_scores_paged():
    rng = np.random.default_rng(1)
    batch, heads, seq, dim, page_size = 2, 2, 21, 4, 8
    per_seq = -(-seq // page_size)
    q = rng.standard_normal((batch, heads, dim)).astype(np.float32)
    k_pages = rng.standard_normal((batch * per_seq + 3, heads, page_size, dim)).astype(np.float32)
    table = rng.permutation(k_pages.shape[0])[: batch * per_seq].reshape(batch, per_seq)
    table = table.astype(np.int32)
    want = np.zeros((batch, heads, seq))
    for b in range(batch):
        for s in range(seq):
            want[b, :, s] = (q[b] * k_pages[table[b, s // page_size], :, s % page_size]).sum(-1)
    scores = np.zeros((batch, heads, seq), np.float32)
    scores_paged[(-(-seq * dim // TPB), batch * heads), TPB](q, k_pages, table, scores)
    np.testing.assert_allclose(scores, want, rtol=1e-4, atol=1e-4, err_msg="scores_paged")


_check_scores_paged()
print("scores_paged: self-checks passed")

# %% tags=["demo"]
# Sectors per request against page size, for float32 keys of a few head dims (the rule of §1):
# pages stop costing anything once a head's page holds a warp's 128 bytes.
import matplotlib.pyplot as plt

_pages = [1, 2, 4, 8, 16, 32]
for _dim in (1, 2, 4, 128):
    plt.plot(
        _pages, [sectors_per_request(p * _dim) for p in _pages], "o-", label=f"head_dim {_dim}"
    )
plt.xscale("log", base=2)
plt.xlabel("page size (positions)")
plt.ylabel("sectors per warp request (4 is ideal)")
plt.legend()
plt.title("What a page size costs a float32 warp read")
plt.show()
print(f"numba {numba.__version__}: kernels {'on the GPU' if ON_GPU else 'in the simulator'}")

# %% [markdown]
# ## §2 KV memory as an engine manages it
#
# An engine with paged KV memory hands out *blocks* of `block_size` token positions (each block
# holds those positions' keys and values for every layer and head). A sequence of `tokens`
# tokens holds `ceil(tokens / block_size)` blocks: its last block is partly empty, and that is
# all the waste paging leaves.
#
# **Admission.** A request should not start unless its cache can grow to the end: an engine that
# admits on the prompt alone must later stop (preempt) someone when decode runs out of blocks.
# The conservative rule reserves the prompt *and* the expected output: admit when
# `kv_blocks(prompt_tokens + expected_output_tokens, block_size)` is at most the free blocks.
# The prompt and the output are one stream of positions in the same blocks, so round once, on
# their sum.
#
# **Prefix caching.** Requests that share a prefix (a system prompt, a few-shot preamble) have
# the same keys and values for it, so an engine keeps the prefix's blocks once and lets every
# request point at them. Only *full* blocks are shared (a block's contents are keyed by all its
# tokens; the partly filled last block of the prefix holds request-specific tokens after it). For
# `requests` requests sharing a `prefix_tokens`-token prefix, the first computes and stores it;
# each of the other `requests - 1` saves `prefix_tokens // block_size` blocks and the prefill
# FLOPs of the `(prefix_tokens // block_size) * block_size` tokens in them, `flops_per_token`
# each (about 2 x the parameter count).
#
# **Preemption.** When blocks run out mid-decode, the engine evicts a sequence and later brings
# it back, one of two ways: *swap* its `tokens * kv_bytes_per_token` bytes to host memory over
# PCIe and back (two crossings, at `link_gbs` GB/s = `link_gbs * 1e9` bytes a second each way),
# or drop them and *recompute* them later with a prefill of `tokens` tokens at
# `prefill_tokens_per_s`. Per token, swapping costs `2 * kv_bytes_per_token / link` and
# recomputing `1 / prefill_tokens_per_s`: recompute wins only when the prefill outruns
# `link / (2 * kv_bytes_per_token)` tokens a second, i.e. a fast GPU behind a slow link with a
# large cache per token (no grouped-query attention). With grouped-query attention on PCIe Gen5
# the swap is usually faster; engines still often recompute, because a swap also needs host
# memory and a free link, and a recompute rides in a batch with other prefills.
#
# **Exercise.** Write the four functions below. `kv_blocks(tokens, block_size)` returns an `int`
# (`tokens >= 0`, `block_size >= 1`). `admit(free_blocks, prompt_tokens, expected_output_tokens,
# block_size)` returns a `bool` (the counts are integers `>= 0`, `block_size >= 1`).
# `prefix_cache_savings(prefix_tokens, requests, block_size, flops_per_token)` returns
# `(blocks_saved, flops_saved)`, an `int` and a `float` (`prefix_tokens >= 0`, `requests >= 1`).
# `preemption(tokens, kv_bytes_per_token, link_gbs, prefill_tokens_per_s)` returns
# `(way, seconds)`: `"swap"` or `"recompute"`, whichever takes less time, with that time as a
# float; a tie goes to `"recompute"` (it needs no host memory).


# %% nbgrader={"grade": false, "grade_id": "kv_blocks", "locked": false, "schema_version": 3, "solution": true, "task": false}
def kv_blocks(tokens, block_size):
    """Blocks of block_size positions a sequence of `tokens` tokens holds: ceil, an int."""
    ### BEGIN SOLUTION
    tokens = _count("tokens", tokens, 0)
    block_size = _count("block_size", block_size, 1)
    return -(-tokens // block_size)
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "admit", "locked": false, "schema_version": 3, "solution": true, "task": false}
def admit(free_blocks, prompt_tokens, expected_output_tokens, block_size):
    """True when the blocks for prompt + expected output (rounded once) fit in free_blocks."""
    ### BEGIN SOLUTION
    free_blocks = _count("free_blocks", free_blocks, 0)
    prompt_tokens = _count("prompt_tokens", prompt_tokens, 0)
    expected = _count("expected_output_tokens", expected_output_tokens, 0)
    return bool(kv_blocks(prompt_tokens + expected, block_size) <= free_blocks)
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "prefix_cache_savings", "locked": false, "schema_version": 3, "solution": true, "task": false}
def prefix_cache_savings(prefix_tokens, requests, block_size, flops_per_token):
    """(blocks saved, prefill FLOPs saved) when `requests` requests share a prefix: the full
    blocks of the prefix, saved by every request but the first; an (int, float)."""
    ### BEGIN SOLUTION
    prefix_tokens = _count("prefix_tokens", prefix_tokens, 0)
    requests = _count("requests", requests, 1)
    block_size = _count("block_size", block_size, 1)
    flops_per_token = _positive("flops_per_token", flops_per_token)
    full = prefix_tokens // block_size
    others = requests - 1
    return full * others, float(full * block_size * flops_per_token * others)
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "preemption", "locked": false, "schema_version": 3, "solution": true, "task": false}
def preemption(tokens, kv_bytes_per_token, link_gbs, prefill_tokens_per_s):
    """("swap" or "recompute", seconds): the cheaper way to evict and restore `tokens` tokens.

    Swap: the cache out to the host and back, 2 * tokens * kv_bytes_per_token bytes at
    link_gbs * 1e9 bytes/s. Recompute: tokens / prefill_tokens_per_s. A tie: "recompute".
    """
    ### BEGIN SOLUTION
    tokens = _count("tokens", tokens, 0)
    per_token = _positive("kv_bytes_per_token", kv_bytes_per_token)
    link = _positive("link_gbs", link_gbs) * 1e9
    rate = _positive("prefill_tokens_per_s", prefill_tokens_per_s)
    swap = 2 * tokens * per_token / link
    recompute = tokens / rate
    return ("swap", swap) if swap < recompute else ("recompute", recompute)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_kv_memory", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
assert kv_blocks(33, 16) == 3 and kv_blocks(32, 16) == 2 and kv_blocks(0, 16) == 0
assert admit(3, 30, 18, 16) is True, "48 tokens are 3 blocks of 16: they fit in 3"
assert admit(3, 30, 19, 16) is False, "49 tokens need a 4th block"
assert admit(3, 17, 15, 16) is True, "17 + 15 = 32 tokens: round the sum, 2 blocks, not 2 + 1"
assert prefix_cache_savings(1000, 10, 16, 2e9) == (62 * 9, 62 * 16 * 2e9 * 9)
assert prefix_cache_savings(1000, 1, 16, 2e9) == (0, 0.0), "one request shares with nobody"
# Llama-2-7B's 524,288 bytes a token over 16 GB/s of PCIe Gen3: 0.134 s to swap 2,048 tokens out
# and back, against 0.2 s to prefill them at 10,000 tokens/s, or 0.1 s at 20,480
assert preemption(2048, 524288, 16.0, 10_000)[0] == "swap"
assert preemption(2048, 524288, 16.0, 20_480) == ("recompute", 0.1)
expect_raises(ValueError, kv_blocks, 5, 0)
expect_raises(TypeError, admit, 3, 30.0, 18, 16)
print("kv_blocks, admit, prefix_cache_savings, preemption: self-checks passed")

# %% [markdown]
# ## §3 Tensor parallelism
#
# Llama-2-70B holds about 69e9 parameters: 138 GB of fp16 weights. An H100 has 80 GiB
# (`memory_mib` in course.toml) and an engine budgets 90% of it; no single card holds the
# weights, let alone a KV cache. *Tensor parallelism* (Megatron-LM's scheme) splits every weight
# matrix of every layer across `n` GPUs: attention by heads, the MLP by its hidden columns and
# then rows. Each GPU holds `1/n` of the weights and of the KV cache (its own heads), so a decode
# step reads `1/n` of the bytes on each GPU, in parallel: the step gets up to `n` times faster.
#
# **The smallest degree.** `min_tp_degree(weight_bytes, kv_bytes, memory_bytes,
# usable_fraction=0.9)` returns the smallest `n` of `1, 2, 4, 8` (a degree must divide the head
# count, and one server has 8 GPUs) with `(weight_bytes + kv_bytes) / n <= usable_fraction *
# memory_bytes`, as an `int`, or `None` when even 8 GPUs do not hold it. `weight_bytes > 0`,
# `kv_bytes >= 0`, `memory_bytes > 0`, `usable_fraction` in `(0, 1]`.
#
# **The price: two all-reduces a layer.** After the attention block and after the MLP, each GPU
# holds a partial sum of the layer's output, and the GPUs add them up: an all-reduce of the
# activations, `batch * hidden * bytes` per GPU. NCCL's ring all-reduce sends each GPU's data
# around a ring of `n` GPUs in `2 (n - 1)` steps, each moving `1/n` of it: every GPU sends
# `2 (n - 1) / n` of the message bytes over its link, and each step also pays a fixed latency.
# `allreduce_s(message_bytes, n, link_gbs, step_latency_s)` is then
# `2 (n - 1) / n * message_bytes / (link_gbs * 1e9) + 2 (n - 1) * step_latency_s` seconds, and
# `0.0` for `n = 1` (nothing to add up). `link_gbs` is NVLink's figure per GPU, `nvlink_gbs` in
# course.toml (900 GB/s on the H100 SXM; the T4 has no NVLink, and its peers are across PCIe).
#
# **TPOT.** `tp_tpot(weight_bytes, kv_bytes, n, n_layers, message_bytes, bandwidth_gbs, link_gbs,
# step_latency_s)` is one decode step's time: the per-GPU bytes at the GPU's bandwidth,
# `(weight_bytes + kv_bytes) / n / (bandwidth_gbs * 1e9)`, plus `2 * n_layers` all-reduces of
# `message_bytes` each, one after another (the next layer needs their result, so this model does
# not overlap them with anything).
#
# **When the all-reduce stops hiding.** An engine can hide communication behind the next layer's
# weight reads only while it is shorter than them. `allreduce_exposed_batch(weight_bytes, n,
# n_layers, hidden, act_bytes, bandwidth_gbs, link_gbs, step_latency_s)` returns the smallest
# batch `B >= 1` at which a step's `2 * n_layers` all-reduces of `B * hidden * act_bytes` bytes
# take at least as long as reading the step's weights, `weight_bytes / n / (bandwidth_gbs * 1e9)`,
# as an `int`; `1` when the latencies alone already take that long; `None` for `n = 1`.
#
# In every function here, byte counts and rates are positive numbers (`kv_bytes` may be 0), `n`,
# `n_layers` and `hidden` integers of at least 1 (`n` one of 1, 2, 4, 8 where it is a TP degree),
# `step_latency_s >= 0`; results in seconds are floats.


# %% nbgrader={"grade": false, "grade_id": "min_tp_degree", "locked": false, "schema_version": 3, "solution": true, "task": false}
def min_tp_degree(weight_bytes, kv_bytes, memory_bytes, usable_fraction=0.9):
    """Smallest TP degree of 1, 2, 4, 8 whose per-GPU share of weights + KV fits the budget;
    None if 8 does not."""
    ### BEGIN SOLUTION
    total = _positive("weight_bytes", weight_bytes) + _non_negative("kv_bytes", kv_bytes)
    budget = _positive("memory_bytes", memory_bytes) * _probability(
        "usable_fraction", usable_fraction
    )
    if budget <= 0:
        raise ValueError(f"usable_fraction must be in (0, 1], got {usable_fraction!r}")
    for n in (1, 2, 4, 8):
        if total / n <= budget:
            return n
    return None
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "allreduce_s", "locked": false, "schema_version": 3, "solution": true, "task": false}
def allreduce_s(message_bytes, n, link_gbs, step_latency_s):
    """Seconds of one ring all-reduce of message_bytes over n GPUs: 2(n-1)/n of the bytes over
    a link of link_gbs GB/s, plus 2(n-1) step latencies; 0.0 for n = 1."""
    ### BEGIN SOLUTION
    size = _positive("message_bytes", message_bytes)
    n = _count("n", n, 1)
    link = _positive("link_gbs", link_gbs) * 1e9
    latency = _non_negative("step_latency_s", step_latency_s)
    if n == 1:
        return 0.0
    return 2 * (n - 1) / n * size / link + 2 * (n - 1) * latency
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "tp_tpot", "locked": false, "schema_version": 3, "solution": true, "task": false}
def tp_tpot(
    weight_bytes, kv_bytes, n, n_layers, message_bytes, bandwidth_gbs, link_gbs, step_latency_s
):
    """Seconds per decode step at TP degree n: per-GPU bytes at bandwidth_gbs, plus
    2 * n_layers all-reduces of message_bytes, not overlapped."""
    ### BEGIN SOLUTION
    total = _positive("weight_bytes", weight_bytes) + _non_negative("kv_bytes", kv_bytes)
    n_layers = _count("n_layers", n_layers, 1)
    read = total / _count("n", n, 1) / (_positive("bandwidth_gbs", bandwidth_gbs) * 1e9)
    return read + 2 * n_layers * allreduce_s(message_bytes, n, link_gbs, step_latency_s)
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "allreduce_exposed_batch", "locked": false, "schema_version": 3, "solution": true, "task": false}
def allreduce_exposed_batch(
    weight_bytes, n, n_layers, hidden, act_bytes, bandwidth_gbs, link_gbs, step_latency_s
):
    """Smallest batch at which a step's 2 * n_layers all-reduces of batch * hidden * act_bytes
    take at least the per-GPU weight-read time; 1 if latency alone does; None for n = 1."""
    ### BEGIN SOLUTION
    weights = _positive("weight_bytes", weight_bytes)
    n = _count("n", n, 1)
    n_layers = _count("n_layers", n_layers, 1)
    hidden = _count("hidden", hidden, 1)
    act_bytes = _positive("act_bytes", act_bytes)
    link = _positive("link_gbs", link_gbs) * 1e9
    latency = _non_negative("step_latency_s", step_latency_s)
    read = weights / n / (_positive("bandwidth_gbs", bandwidth_gbs) * 1e9)
    if n == 1:
        return None
    fixed = 2 * n_layers * 2 * (n - 1) * latency
    per_sequence = 2 * n_layers * 2 * (n - 1) / n * hidden * act_bytes / link
    if fixed >= read:
        return 1
    batch = max(1, math.ceil((read - fixed) / per_sequence))
    while batch > 1 and fixed + (batch - 1) * per_sequence >= read:  # float rounding
        batch -= 1
    while fixed + batch * per_sequence < read:
        batch += 1
    return batch
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_tensor_parallel", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_h100_bytes = _hardware_figure("H100_SXM", "memory_mib") * 2**20
assert min_tp_degree(138e9, 0, _h100_bytes) == 2, "138 GB of weights: two H100s at the least"
assert min_tp_degree(14e9, 2e9, _h100_bytes) == 1
assert min_tp_degree(1e15, 0, _h100_bytes) is None
assert allreduce_s(16384, 1, 900.0, 1e-6) == 0.0, "one GPU adds nothing up"
assert math.isclose(allreduce_s(9e8, 2, 900.0, 0.0), 1e-3), "half of 2 x 0.9 GB at 900 GB/s"
assert math.isclose(allreduce_s(1.0, 4, 900.0, 1e-6), 1.5 / 900e9 + 6e-6)
assert math.isclose(tp_tpot(2e9, 0, 1, 10, 1e6, 1000.0, 900.0, 0.0), 2e-3)
assert allreduce_exposed_batch(2e9, 1, 10, 4096, 2, 1000.0, 900.0, 1e-6) is None
assert allreduce_exposed_batch(2e9, 2, 10, 4096, 2, 1000.0, 900.0, 1e-3) == 1
expect_raises(ValueError, allreduce_s, 100.0, 0, 900.0, 0.0)
print("min_tp_degree, allreduce_s, tp_tpot, allreduce_exposed_batch: self-checks passed")

# %% tags=["demo"]
# TPOT against the TP degree for Llama-2-70B on H100 SXMs at batch 1 and 64, 2,048 tokens of
# context each: bandwidth and NVLink from course.toml; the model's figures and an assumed ring
# step latency of 2 us beside them (28 us an all-reduce on 8 GPUs: NCCL measures tens of us for
# small messages, which is why engines write their own one-shot all-reduce for decode).
_bw = _hardware_figure("H100_SXM", "bandwidth_gbs")
_link = _hardware_figure("H100_SXM", "nvlink_gbs")
_weights, _layers, _hidden = 69e9 * 2, 80, 8192  # fp16 weights; 80 layers of width 8192
_kv_per_token = 2 * 80 * 8 * 128 * 2  # K and V, 80 layers, 8 KV heads of 128, fp16: 327,680 B
_degrees = [1, 2, 4, 8]
for _batch in (1, 64):
    _tpot = [
        tp_tpot(
            _weights,
            _batch * 2048 * _kv_per_token,
            n,
            _layers,
            _batch * _hidden * 2,
            _bw,
            _link,
            2e-6,
        )
        * 1e3
        for n in _degrees
    ]
    plt.plot(_degrees, _tpot, "o-", label=f"batch {_batch}")
plt.plot(
    _degrees,
    [_weights / n / (_bw * 1e9) * 1e3 for n in _degrees],
    "k--",
    label="weights' bytes alone",
)
plt.xlabel("tensor-parallel degree (H100 SXM GPUs)")
plt.ylabel("TPOT (ms)")
plt.xticks(_degrees)
plt.legend()
plt.title("Llama-2-70B decode: each doubling halves the bytes, not the all-reduces")
plt.show()
print(
    "70B fp16 fits on",
    min_tp_degree(_weights, 0, _h100_bytes),
    "H100s at the least;",
    "the all-reduces take as long as the weights from batch",
    allreduce_exposed_batch(_weights, 8, _layers, _hidden, 2, _bw, _link, 2e-6),
    "at TP 8",
)

# %% [markdown]
# ## §4 Mixture of experts: resident weights, active weights
#
# A mixture-of-experts layer replaces the one MLP with `n_experts` of them and a router that
# sends each token to its `top_k` best. Mixtral 8x7B: 8 experts, top 2. Two parameter counts
# matter, and they are not the same:
#
# * **resident** = `shared_params + n_experts * expert_params`: what must sit in GPU memory
#   (attention, embeddings and norms are `shared_params`; `expert_params` is one expert's
#   weights summed over all layers);
# * **active** = `shared_params + top_k * expert_params`: what one token computes with, so its
#   FLOPs are `2 * active`.
#
# **Experts touched by a batch.** At batch 1 a decode step reads the shared weights and `top_k`
# experts a layer. A batch of `B` tokens, each routed independently and uniformly to `top_k` of
# the `n_experts`, touches on average `n_experts * (1 - (1 - top_k / n_experts) ** B)` distinct
# experts: an expert is missed by one token with probability `1 - top_k / n_experts`, by all `B`
# with that to the `B`. Already at `B = 8` on Mixtral nearly every expert is read (7.2 of 8), so
# the step reads nearly the resident bytes while computing only the active FLOPs.
#
# **The crossover moves.** A dense model's decode step becomes compute-bound at the batch where
# its intensity `2 * B * params / (bytes_per_param * params)` reaches the GPU's ridge. For an MoE
# the step's FLOPs are `2 * B * active` and its weight bytes
# `bytes_per_param * (shared_params + experts_touched(n_experts, top_k, B) * expert_params)`
# (the KV cache left out, as in M9's weights-only crossover). `moe_crossover_batch(shared_params,
# expert_params, n_experts, top_k, bytes_per_param, ridge)` returns the smallest batch `B >= 1`
# whose intensity is at least `ridge` (FLOP/byte), as an `int`, or `None` when no batch up to
# `2**20` gets there. Once a batch touches every expert, the crossover is about `resident / active`
# times the dense crossover of a model of the active size (3.6 times for Mixtral).
#
# **Exercise.** Write `moe_params(shared_params, expert_params, n_experts, top_k)`, returning
# `(resident, active)` as `int`s; `experts_touched(n_experts, top_k, batch)`, a `float`; and
# `moe_crossover_batch`. Counts are integers: `shared_params >= 0`, `expert_params >= 1`,
# `n_experts >= 1`, `1 <= top_k <= n_experts` (`ValueError` for a `top_k` past `n_experts`),
# `batch >= 0`; `bytes_per_param` and `ridge` positive numbers.


# %% nbgrader={"grade": false, "grade_id": "moe_params", "locked": false, "schema_version": 3, "solution": true, "task": false}
def moe_params(shared_params, expert_params, n_experts, top_k):
    """(resident, active) parameter counts of a mixture of experts, two ints."""
    ### BEGIN SOLUTION
    shared = _count("shared_params", shared_params, 0)
    expert = _count("expert_params", expert_params, 1)
    n_experts = _count("n_experts", n_experts, 1)
    top_k = _count("top_k", top_k, 1)
    if top_k > n_experts:
        raise ValueError(f"top_k must be at most n_experts ({n_experts}), got {top_k}")
    return shared + n_experts * expert, shared + top_k * expert
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "experts_touched", "locked": false, "schema_version": 3, "solution": true, "task": false}
def experts_touched(n_experts, top_k, batch):
    """Expected distinct experts a batch of independent, uniformly routed tokens reads:
    n_experts * (1 - (1 - top_k / n_experts) ** batch), a float."""
    ### BEGIN SOLUTION
    n_experts = _count("n_experts", n_experts, 1)
    top_k = _count("top_k", top_k, 1)
    batch = _count("batch", batch, 0)
    if top_k > n_experts:
        raise ValueError(f"top_k must be at most n_experts ({n_experts}), got {top_k}")
    return n_experts * (1 - (1 - top_k / n_experts) ** batch)
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "moe_crossover_batch", "locked": false, "schema_version": 3, "solution": true, "task": false}
def moe_crossover_batch(shared_params, expert_params, n_experts, top_k, bytes_per_param, ridge):
    """Smallest batch (<= 2**20) at which an MoE decode step's weight intensity reaches the
    ridge, an int; None if none does."""
    ### BEGIN SOLUTION
    _, active = moe_params(shared_params, expert_params, n_experts, top_k)
    per_param = _positive("bytes_per_param", bytes_per_param)
    ridge = _positive("ridge", ridge)

    def reaches(batch):
        read = shared_params + experts_touched(n_experts, top_k, batch) * expert_params
        return 2 * batch * active >= ridge * per_param * read

    if not reaches(2**20):
        return None
    low, high = 1, 2**20  # intensity grows with the batch: the first batch that reaches it
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if reaches(middle) else (middle + 1, high)
    return low
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_moe", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Mixtral 8x7B, roughly: 1.6e9 shared, 5.6e9 per expert (32 layers), 8 experts, top 2
assert moe_params(1_600_000_000, 5_600_000_000, 8, 2) == (46_400_000_000, 12_800_000_000)
assert math.isclose(experts_touched(8, 2, 1), 2.0), "one token reads its top_k experts"
assert math.isclose(experts_touched(8, 2, 8), 8 * (1 - 0.75**8))
assert experts_touched(8, 2, 0) == 0.0, "no tokens read no experts"
assert moe_crossover_batch(0, 1000, 1, 1, 2, 100.0) == 100, "one expert: the dense crossover"
expect_raises(ValueError, moe_params, 0, 10, 4, 5)
print("moe_params, experts_touched, moe_crossover_batch: self-checks passed")

# %% tags=["demo"]
# Experts touched against the batch (Mixtral's 8 experts, top 2), and the crossover batch on an
# H100 SXM (its ridge from course.toml) for the dense model of the same active size vs the MoE.
_peak, _band = peak_figures("H100_SXM")
_batches = np.arange(0, 33)
plt.plot(_batches, [experts_touched(8, 2, int(b)) for b in _batches])
plt.xlabel("batch (tokens in a decode step)")
plt.ylabel("distinct experts read, of 8")
plt.title("A small batch already reads every expert")
plt.show()
_dense = moe_crossover_batch(12_800_000_000, 1, 1, 1, 2, _peak / _band)
_moe = moe_crossover_batch(1_600_000_000, 5_600_000_000, 8, 2, 2, _peak / _band)
print(
    f"H100 ridge {_peak / _band:.0f} FLOP/byte: a dense 12.8B model crosses at batch {_dense},"
    f" Mixtral-like 8x top-2 at batch {_moe}"
)

# %% [markdown]
# ## §5 Speculative decoding, with an acceptance rate
#
# A small *draft* model guesses `k` tokens one after another; the target model then checks all
# `k` in one step (a decode step over `k + 1` positions reads the weights once, so it costs
# about what one decode step costs). It keeps the guesses up to the first one it rejects and adds
# one token of its own. It does not get `k` tokens a step: if each guess is accepted with
# probability `a` independently, the expected tokens a step are
# `(1 - a ** (k + 1)) / (1 - a)` (Leviathan et al., 2023): `1` for `k = 0`, and `k + 1` when
# `a = 1`.
#
# The draft is not free: its `k` steps read its own weights `k` times. With `draft_cost` the
# draft's step time over the target's (about the ratio of their weight bytes: 0.1 for a 7B draft
# of a 70B target), a speculative step takes `1 + k * draft_cost` target-step times, and the
# speed-up over plain decoding is `expected_tokens(a, k) / (1 + k * draft_cost)`. Longer drafts
# add ever less (each extra guess counts only if all before it were accepted) and cost the same
# each, so there is a best `k`.
#
# **Exercise.** `expected_tokens(acceptance, k)` and `spec_speedup(acceptance, k, draft_cost)`
# return floats; `best_draft_length(acceptance, draft_cost, k_max=16)` returns the `k` of
# `0, 1, ..., k_max` with the largest speed-up, the smallest such `k` on a tie, as an `int`
# (`0` means: do not speculate). `acceptance` is a probability in `[0, 1]`, `k` and `k_max`
# integers `>= 0`, `draft_cost >= 0`.


# %% nbgrader={"grade": false, "grade_id": "expected_tokens", "locked": false, "schema_version": 3, "solution": true, "task": false}
def expected_tokens(acceptance, k):
    """Expected tokens one speculative step yields: (1 - a**(k+1)) / (1 - a); k + 1 at a = 1."""
    ### BEGIN SOLUTION
    a = _probability("acceptance", acceptance)
    k = _count("k", k, 0)
    if a == 1:
        return float(k + 1)
    return (1 - a ** (k + 1)) / (1 - a)
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "spec_speedup", "locked": false, "schema_version": 3, "solution": true, "task": false}
def spec_speedup(acceptance, k, draft_cost):
    """Speed-up over plain decoding: expected_tokens(acceptance, k) / (1 + k * draft_cost)."""
    ### BEGIN SOLUTION
    cost = _non_negative("draft_cost", draft_cost)
    return expected_tokens(acceptance, k) / (1 + k * cost)
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "best_draft_length", "locked": false, "schema_version": 3, "solution": true, "task": false}
def best_draft_length(acceptance, draft_cost, k_max=16):
    """The k of 0..k_max with the largest spec_speedup (the smallest on a tie), an int."""
    ### BEGIN SOLUTION
    k_max = _count("k_max", k_max, 0)
    best, best_speedup = 0, spec_speedup(acceptance, 0, draft_cost)
    for k in range(1, k_max + 1):
        speedup = spec_speedup(acceptance, k, draft_cost)
        if speedup > best_speedup:
            best, best_speedup = k, speedup
    return best
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_speculation", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
assert math.isclose(expected_tokens(0.8, 4), (1 - 0.8**5) / 0.2), "3.36 tokens, not 4"
assert expected_tokens(1.0, 4) == 5.0 and expected_tokens(0.0, 4) == 1.0
assert expected_tokens(0.5, 0) == 1.0, "no draft: one token a step"
assert math.isclose(spec_speedup(0.8, 4, 0.1), 3.3616 / 1.4)
assert best_draft_length(0.8, 0.1) == 6, "2.47x at k = 6; k = 4 gives 2.40x"
assert best_draft_length(0.3, 0.5) == 0, "a poor, costly draft: do not speculate"
expect_raises(ValueError, expected_tokens, 1.5, 2)
print("expected_tokens, spec_speedup, best_draft_length: self-checks passed")

# %% [markdown]
# ## §6 Requests, not batches
#
# A service is not handed batches; it is handed requests, at some rate, and judged per request:
# the time to the first token (TTFT) and the time per output token after it (TPOT), at their
# 99th percentile. The batch is whatever the arrivals make it.
#
# **Little's law on requests.** In a steady state, the requests in the system equal the arrival
# rate times the time each spends there: `concurrency = rate * latency`. A request in decode
# stays `output_tokens * TPOT` seconds, so at `rate` requests a second the decode batch is
# `B = rate * output_tokens * TPOT`. And a step's time grows with the batch (each sequence adds
# its KV reads): model it as `TPOT = base_s + per_seq_s * B`. Put together,
# `TPOT = base_s / (1 - per_seq_s * rate * output_tokens)`: the load feeds back into the latency,
# and when `per_seq_s * rate * output_tokens >= 1` the batch grows without bound (TPOT is
# infinite: `math.inf`). `decode_tpot(rate, output_tokens, base_s, per_seq_s)` returns it as a
# float (`rate >= 0`, `output_tokens >= 1` an integer, `base_s > 0`, `per_seq_s >= 0`).
#
# **TTFT includes the queue.** TTFT equals the prefill time only when nobody is ahead. Here the
# engine prefills one request at a time, first come first served, each taking `prefill_s`:
# request `i` starts its prefill at the later of its arrival and the end of request `i - 1`'s
# prefill, and its TTFT is that start plus `prefill_s` minus its arrival.
# `ttfts(arrivals, prefill_s)` takes the arrival times in seconds (a list of floats, sorted, at
# least 0) and returns the list of TTFTs in the same order (`prefill_s > 0`; an empty list gives
# an empty list).
#
# **Arrivals.** Requests from many independent users arrive as a Poisson process: the gaps
# between them are exponential with mean `1 / rate`. `arrival_times(rate, n, seed)` returns the
# first `n` arrival times as a list of floats, made exactly this way so that the same seed gives
# the same arrivals everywhere:
# `numpy.cumsum(numpy.random.default_rng(seed).exponential(1.0 / rate, size=n))`
# (`rate > 0`, `n >= 0` and `seed >= 0` integers).
#
# **Percentiles and goodput.** `p99(values)` is the nearest-rank 99th percentile: of the values
# sorted, the `ceil(99 * len(values) / 100)`-th (counting from 1, in exact integer arithmetic), a float (`ValueError` for an empty
# list). *Goodput* is the load a service carries within its targets (DistServe, 2024): of the
# arrival rates `rates` (requests a second, a list of positive numbers), the largest at which
# both the p99 TTFT of `arrival_times(rate, n, seed)` is at most `ttft_slo_s` and
# `decode_tpot(rate, output_tokens, base_s, per_seq_s)` is at most `tpot_slo_s`; `0.0` when
# none is. `goodput(rates, engine, ttft_slo_s, tpot_slo_s, n, seed)` takes `engine` as a dict with
# the keys `prefill_s`, `output_tokens`, `base_s` and `per_seq_s` (`ValueError` for a missing
# key) and returns a float. Throughput past the goodput is not capacity: it is requests that
# miss their targets.


# %% nbgrader={"grade": false, "grade_id": "decode_tpot", "locked": false, "schema_version": 3, "solution": true, "task": false}
def decode_tpot(rate, output_tokens, base_s, per_seq_s):
    """Steady-state TPOT by Little's law: base_s / (1 - per_seq_s * rate * output_tokens);
    math.inf once that denominator is <= 0."""
    ### BEGIN SOLUTION
    rate = _non_negative("rate", rate)
    output_tokens = _count("output_tokens", output_tokens, 1)
    base = _positive("base_s", base_s)
    per_seq = _non_negative("per_seq_s", per_seq_s)
    left = 1 - per_seq * rate * output_tokens
    return base / left if left > 0 else math.inf
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "arrival_times", "locked": false, "schema_version": 3, "solution": true, "task": false}
def arrival_times(rate, n, seed):
    """The first n arrival times (s) of a Poisson process of `rate` per second, drawn with
    numpy.random.default_rng(seed): a list of floats."""
    ### BEGIN SOLUTION
    rate = _positive("rate", rate)
    n = _count("n", n, 0)
    seed = _count("seed", seed, 0)
    gaps = np.random.default_rng(seed).exponential(1.0 / rate, size=n)
    return [float(t) for t in np.cumsum(gaps)]
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "ttfts", "locked": false, "schema_version": 3, "solution": true, "task": false}
def ttfts(arrivals, prefill_s):
    """TTFT (s) of each request of a first-come-first-served prefill queue, a list of floats."""
    ### BEGIN SOLUTION
    prefill = _positive("prefill_s", prefill_s)
    if not isinstance(arrivals, (list, tuple)):
        raise TypeError(f"arrivals must be a list of times in seconds, got {arrivals!r}")
    out, free_at, last = [], 0.0, 0.0
    for i, value in enumerate(arrivals):
        arrival = _non_negative(f"arrivals[{i}]", value)
        if arrival < last:
            raise ValueError(f"arrivals must be sorted: arrivals[{i}] = {value!r} < {last!r}")
        last = arrival
        start = max(arrival, free_at)
        free_at = start + prefill
        out.append(free_at - arrival)
    return out
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "p99", "locked": false, "schema_version": 3, "solution": true, "task": false}
def p99(values):
    """Nearest-rank 99th percentile: the ceil(99 * n / 100)-th smallest of n values, a float."""
    ### BEGIN SOLUTION
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"values must be a list of numbers, got {values!r}")
    if not values:
        raise ValueError("values must not be empty: a percentile of nothing is undefined")
    ordered = sorted(_number(f"values[{i}]", v) for i, v in enumerate(values))
    return ordered[-(-99 * len(ordered) // 100) - 1]
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "goodput", "locked": false, "schema_version": 3, "solution": true, "task": false}
def goodput(rates, engine, ttft_slo_s, tpot_slo_s, n, seed):
    """The largest rate of `rates` whose p99 TTFT and TPOT meet their targets; 0.0 if none."""
    ### BEGIN SOLUTION
    if not isinstance(engine, dict):
        raise TypeError(f"engine must be a dict, got {engine!r}")
    missing = {"prefill_s", "output_tokens", "base_s", "per_seq_s"} - set(engine)
    if missing:
        raise ValueError(f"engine lacks {sorted(missing)}")
    if not isinstance(rates, (list, tuple)):
        raise TypeError(f"rates must be a list of requests per second, got {rates!r}")
    ttft_slo = _positive("ttft_slo_s", ttft_slo_s)
    tpot_slo = _positive("tpot_slo_s", tpot_slo_s)
    best = 0.0
    for rate in rates:
        rate = _positive("rate", rate)
        tpot = decode_tpot(rate, engine["output_tokens"], engine["base_s"], engine["per_seq_s"])
        waits = ttfts(arrival_times(rate, n, seed), engine["prefill_s"])
        if tpot <= tpot_slo and (not waits or p99(waits) <= ttft_slo):
            best = max(best, rate)
    return best
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_requests", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
assert math.isclose(decode_tpot(2.0, 100, 0.02, 0.0025), 0.04), "batch 2 x 100 x 0.04 = 8"
assert decode_tpot(4.0, 100, 0.02, 0.0025) == math.inf, "1 - 0.0025 x 4 x 100 = 0: unbounded"
_arrivals = arrival_times(5.0, 4, 7)
assert _arrivals == [float(t) for t in np.cumsum(np.random.default_rng(7).exponential(0.2, 4))]
assert np.allclose(ttfts([0.0, 0.05, 1.0], 0.1), [0.1, 0.15, 0.1]), "the second waits 0.05 s"
assert p99(list(range(1, 101))) == 99.0 and p99([3, 1, 2]) == 3.0
_engine = {"prefill_s": 0.05, "output_tokens": 100, "base_s": 0.02, "per_seq_s": 0.0025}
assert goodput([1.0, 2.0, 3.0], _engine, 10.0, 0.045, 200, 0) == 2.0, "TPOT 0.08 s at 3/s"
assert goodput([3.0], _engine, 10.0, 0.045, 200, 0) == 0.0
expect_raises(ValueError, p99, [])
print("decode_tpot, arrival_times, ttfts, p99, goodput: self-checks passed")

# %% tags=["demo"]
# Goodput against load, for an engine whose prefill takes 0.2 s (at most 5 requests a second)
# and whose decode step grows by 1 ms a sequence, with targets of 1 s p99 TTFT and 40 ms TPOT
# (2,000 seeded requests a point). Left: the p99 TTFT, which the queue sends up long before the
# prefill is busy all the time. Middle: TPOT by Little's law. Right: the requests a second that
# meet both targets against the offered load; past the knee the engine still answers every
# request, but late: throughput is not goodput.
_busy = {"prefill_s": 0.2, "output_tokens": 100, "base_s": 0.02, "per_seq_s": 0.001}
_t0 = time.perf_counter()
_rates = [float(r) for r in np.linspace(0.25, 6.0, 24)]
_waits = [ttfts(arrival_times(r, 2000, 0), _busy["prefill_s"]) for r in _rates]
_tpots = [decode_tpot(r, 100, 0.02, 0.001) for r in _rates]
_good = [
    r * np.mean(np.array(w) <= 1.0) if t <= 0.040 else 0.0
    for r, w, t in zip(_rates, _waits, _tpots, strict=True)
]
print(f"{len(_rates) * 2000:,} requests simulated in {time.perf_counter() - _t0:.2f} s")
_fig, (_a, _b, _c) = plt.subplots(1, 3, figsize=(14, 3.5))
_a.plot(_rates, [p99(w) for w in _waits])
_a.axhline(1.0, color="k", ls="--")
_a.set(xlabel="arrival rate (requests/s)", ylabel="p99 TTFT (s)", yscale="log")
_b.plot(_rates, [min(t, 1.0) * 1e3 for t in _tpots])
_b.axhline(40, color="k", ls="--")
_b.set(xlabel="arrival rate (requests/s)", ylabel="TPOT (ms)", ylim=(0, 100))
_c.plot(_rates, _rates, "k:", label="offered load")
_c.plot(_rates, _good, label="requests/s within both targets")
_best = goodput(_rates, _busy, 1.0, 0.040, 2000, 0)
_c.axvline(_best, color="g", ls="--", label=f"goodput {_best:.2f}/s (p99 targets)")
_c.set(xlabel="arrival rate (requests/s)", ylabel="requests/s")
_c.legend()
plt.show()
print(
    f"goodput {_best:.2f} requests/s; Little's law puts {_best * 100 * decode_tpot(_best, 100, 0.02, 0.001):.1f}"
    " sequences in decode there"
)
