# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
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
# # S5.2 Milestone M9: place your model's decode on the T4 roofline
#
# In S5.1 you drew a roofline: a GPU can never go faster than its peak FLOP/s, and a kernel that
# moves bytes from DRAM can never go faster than bandwidth x (FLOPs per byte). Today you apply that
# picture to the workload the whole project is heading towards: **generating text, one token per
# step, with the small LLaMA-style model of the course**, and then to the questions a serving
# engineer asks of a real model on a real GPU.
#
# By the end of this notebook you will have:
#
# 1. counted the parameters of a LLaMA-style model from its config, and the ones a decode step
#    actually multiplies;
# 2. counted the bytes the KV cache adds for every token of context;
# 3. computed the arithmetic intensity of one decode step at batch 1, 8 and 32;
# 4. found the smallest batch (if any!) at which decode stops being bandwidth-bound on a T4;
# 5. turned the bytes into the tokens/s ceiling a serving engineer quotes, and checked whether the
#    batch fits in the GPU's memory at all;
# 6. split a decode step into its two kinds of kernel (weight matmuls, attention over the cache),
#    and set prefill against decode: time to first token against time per output token;
# 7. judged a measured decode by its bandwidth utilisation (MBU) and its FLOP utilisation (MFU);
# 8. batched sequences of different lengths together (continuous batching), chosen the batch
#    that meets a latency target, and found how many prompt tokens ride along with a decode step
#    for free (chunked prefill);
# 9. seen why decode attention stays memory-bound whatever the batch, what grouped-query
#    attention and speculative decoding change, and why a batch-1 attention kernel splits the
#    cache across the GPU (split-KV, flash-decoding);
# 10. written the numbers and a one-line conclusion to `metrics.json["m9_roofline"]`.
#
# ### Rules the grader holds you to
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
# So `batch=True` or a config with `dim=128.0` is a `TypeError`, while `batch=0` or
# `n_layers=0` is a `ValueError`. The hidden tests call every function with bad arguments of both
# kinds.
#
# **Sizes in bytes per number.** Every function that takes one (`dtype_bytes`, the weights', and
# `kv_dtype_bytes`, the KV cache's) takes a positive, finite `int` or `float`: `2` for
# fp16/bf16, `1` for 8-bit, `0.5` for 4-bit, or an average such as `0.71` (section 8). Where a
# function takes both, `kv_dtype_bytes=None` (its default) means "the same as `dtype_bytes`".
#
# **Return types** are the plain Python ones each docstring names (`int`, `float`, `bool`,
# `str`, `dict`, `tuple` or `None`), and the grader draws its own model configs, contexts and
# GPUs, so write the general formula, not the course model's numbers.
#
# Everything here is arithmetic on a config dict: **no GPU is needed**.
#
# ### Before you start: where the GPU figures come from
#
# The GPU figures (peak FLOP/s, bandwidth, memory, SMs) live in one place, `course.toml` at the
# root of the course repository. When the course is released, a copy of its `[hardware]` tables
# is written into the first code cell below (`COURSE_HARDWARE`), generated from `course.toml`, so
# this notebook also runs opened on its own: on Colab, *File > Open notebook > GitHub*, no clone
# needed. When a `course.toml` is found in the working folder or a folder above it (your own
# clone, on your machine or cloned on Colab), that file is read instead of the copy.
#
# The last cell writes `metrics.json` next to `course.toml`, or into the working folder when
# there is no `course.toml` (on Colab opened from GitHub, that is `/content`: download it from
# the file browser and commit it at the root of your fork, beside `course.toml`).
# Nothing needs installing: the graded code uses only the standard library, and the plot uses
# numpy and matplotlib, which Colab already has.

# %%
import contextlib
import json
import math
import numbers
import os
import stat
import tempfile
from fractions import Fraction
from pathlib import Path

try:
    import tomllib  # Python 3.11+
except ModuleNotFoundError:  # pragma: no cover - older Pythons
    import tomli as tomllib

# The [hardware] tables of course.toml, written into this cell by `grader release`, so that the
# notebook works opened on its own (Colab straight from GitHub, no clone). A course.toml found
# at or above the working directory is read instead.
COURSE_HARDWARE = {'A100_SXM': {'bandwidth_gbs': 2039.0,
                                'compute_capability': [8, 0],
                                'fp16_tensor_tflops': 312.0,
                                'fp32_tflops': 19.5,
                                'int8_tensor_tops': 624.0,
                                'memory_mib': 81920,
                                'name': 'NVIDIA A100 SXM 80GB',
                                'nvlink_gbs': 600.0,
                                'pcie_gbs': 32.0,
                                'sm': {'max_blocks': 32,
                                       'max_registers_per_block': 65536,
                                       'max_registers_per_thread': 255,
                                       'max_shared_memory_per_block': 166912,
                                       'max_threads': 2048,
                                       'max_threads_per_block': 1024,
                                       'max_warps': 64,
                                       'register_granularity': 256,
                                       'register_sub_partitions': 4,
                                       'registers': 65536,
                                       'reserved_shared_memory_per_block': 1024,
                                       'shared_memory_granularity': 128,
                                       'shared_memory_kib': 164},
                                'sm_count': 108,
                                'usable_memory_fraction': 0.9},
                   'H100_SXM': {'bandwidth_gbs': 3350.0,
                                'compute_capability': [9, 0],
                                'fp16_tensor_tflops': 989.0,
                                'fp32_tflops': 67.0,
                                'fp8_tensor_tflops': 1979.0,
                                'int8_tensor_tops': 1979.0,
                                'memory_mib': 81559,
                                'name': 'NVIDIA H100 SXM',
                                'nvlink_gbs': 900.0,
                                'pcie_gbs': 64.0,
                                'sm': {'max_blocks': 32,
                                       'max_registers_per_block': 65536,
                                       'max_registers_per_thread': 255,
                                       'max_shared_memory_per_block': 232448,
                                       'max_threads': 2048,
                                       'max_threads_per_block': 1024,
                                       'max_warps': 64,
                                       'register_granularity': 256,
                                       'register_sub_partitions': 4,
                                       'registers': 65536,
                                       'reserved_shared_memory_per_block': 1024,
                                       'shared_memory_granularity': 128,
                                       'shared_memory_kib': 228},
                                'sm_count': 132,
                                'usable_memory_fraction': 0.9},
                   'H200': {'bandwidth_gbs': 4800.0,
                            'compute_capability': [9, 0],
                            'fp16_tensor_tflops': 989.0,
                            'fp32_tflops': 67.0,
                            'fp8_tensor_tflops': 1979.0,
                            'int8_tensor_tops': 1979.0,
                            'memory_mib': 143771,
                            'name': 'NVIDIA H200',
                            'nvlink_gbs': 900.0,
                            'pcie_gbs': 64.0,
                            'sm': {'max_blocks': 32,
                                   'max_registers_per_block': 65536,
                                   'max_registers_per_thread': 255,
                                   'max_shared_memory_per_block': 232448,
                                   'max_threads': 2048,
                                   'max_threads_per_block': 1024,
                                   'max_warps': 64,
                                   'register_granularity': 256,
                                   'register_sub_partitions': 4,
                                   'registers': 65536,
                                   'reserved_shared_memory_per_block': 1024,
                                   'shared_memory_granularity': 128,
                                   'shared_memory_kib': 228},
                            'sm_count': 132,
                            'usable_memory_fraction': 0.9},
                   'T4': {'bandwidth_gbs': 320.0,
                          'compute_capability': [7, 5],
                          'fp16_tensor_tflops': 65.0,
                          'fp32_tflops': 8.1,
                          'int8_tensor_tops': 130.0,
                          'memory_mib': 15360,
                          'name': 'NVIDIA T4',
                          'pcie_gbs': 16.0,
                          'sm': {'max_blocks': 16,
                                 'max_registers_per_block': 65536,
                                 'max_registers_per_thread': 255,
                                 'max_shared_memory_per_block': 65536,
                                 'max_threads': 1024,
                                 'max_threads_per_block': 1024,
                                 'max_warps': 32,
                                 'register_granularity': 256,
                                 'register_sub_partitions': 4,
                                 'registers': 65536,
                                 'reserved_shared_memory_per_block': 0,
                                 'shared_memory_granularity': 256,
                                 'shared_memory_kib': 64},
                          'sm_count': 40,
                          'sustained_fp16_tflops': 24.0,
                          'usable_memory_fraction': 0.9}}

# %% [markdown]
# ## The two models we will compare
#
# A LLaMA-style decoder is fully described (for our purposes) by seven numbers:
#
# | key | meaning |
# |---|---|
# | `dim` | width of the residual stream (the hidden size) |
# | `n_layers` | number of transformer blocks |
# | `n_heads` | query heads per block; each has `head_dim = dim // n_heads` channels |
# | `n_kv_heads` | key/value heads per block (grouped-query attention: several query heads share one K/V head) |
# | `vocab_size` | number of token ids |
# | `ffn_hidden_dim` | inner width of the SwiGLU feed-forward block |
# | `tied_embeddings` | `True` when the output head reuses the embedding matrix |
#
# A config may also carry a `name` (a string). Nothing else is allowed: a typo such as `n_layer`
# should be an error, not a silently ignored key.
#
# `COURSE_MODEL` is the small model the course trains (well under two million parameters).
# `LLAMA3_8B` has the shape of Llama-3-8B; we use it only on paper, as a comparison. Its 8.03
# billion fp16 weights take 16.06 GB (decimal gigabytes, 1e9 bytes). A T4 sold as "16 GB" holds
# 15,360 MiB (nvidia-smi's figure, ECC on), 16.11e9 bytes: the weights squeeze in with 46 MB to
# spare, and nothing left for the KV cache, the activations or the CUDA runtime. Section 8 makes
# that check a function. If you trained your own model with a different shape, put its config
# in `COURSE_MODEL`.

# %%
COURSE_GPU = "T4"  # a key of the [hardware.*] tables in course.toml
CONTEXT_LEN = 512  # tokens already in the KV cache when we measure a decode step
# What a serving engine keeps inside its memory budget besides the weights and the KV cache:
# the activation peak of its profiling run, the CUDA context, cuBLAS/NCCL workspaces and CUDA
# graphs (section 8). vLLM's own profile of Llama-3-8B on an H100 (vllm-project/vllm pull
# request 10511) logs 1.79 GiB of non-torch memory and a 1.26 GiB activation peak: 3 GiB.
RUNTIME_BYTES = 3 * 2**30

COURSE_MODEL = {
    "name": "course-model",
    "dim": 128,
    "n_layers": 4,
    "n_heads": 4,
    "n_kv_heads": 2,
    "vocab_size": 4096,
    "ffn_hidden_dim": 384,
    "tied_embeddings": True,
}

LLAMA3_8B = {
    "name": "llama-3-8b",
    "dim": 4096,
    "n_layers": 32,
    "n_heads": 32,
    "n_kv_heads": 8,
    "vocab_size": 128256,
    "ffn_hidden_dim": 14336,
    "tied_embeddings": False,
}

CONFIG_INT_KEYS = ("dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "ffn_hidden_dim")
CONFIG_KEYS = CONFIG_INT_KEYS + ("tied_embeddings",)
OPTIONAL_CONFIG_KEYS = ("name",)

# %% [markdown]
# A few helpers are provided so you can concentrate on the ideas. Each follows the notebook's
# error convention: `check_int` checks an integer argument, `check_bytes` a size in bytes per
# number (an int or a float, so that 0.5 can stand for a 4-bit weight), `check_runtime_bytes`
# the engine's own bytes of section 8 (a number >= 0), `check_gpu` a GPU dict,
# `find_course_root` walks up from the current directory to the folder that holds `course.toml`,
# and `hardware_tables` returns course.toml's `[hardware]` tables (from the file when there is
# one, else from the copy in the first cell; section 6 uses it). `says_bandwidth_bound` is the
# rule section 7's conclusion is graded by, and `self_check` is what the self-check cells use.
#
# The self-check cells run their checks inside a function that they delete afterwards, so that
# none of their names (`_t4_like`, `_exact`, ...) is left behind to replace a helper of yours
# with the same name.

# %%
import re  # for the self-checks and says_bandwidth_bound


def check_int(value, what, minimum):
    """Return `value` as an int: TypeError unless it is an integer, ValueError if < `minimum`.

    bool (Python's or NumPy's) is rejected even though Python treats it as an int: `batch=True`
    is a bug, not a batch.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what} must be an int, got {value!r} ({type(value).__name__})")
    if value < minimum:
        raise ValueError(f"{what} must be >= {minimum}, got {value}")
    return int(value)


def check_bytes(value, what):
    """Return `value` (bytes per number) as an int or float: TypeError unless it is a real
    number (not a bool), ValueError unless it is finite and > 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a number of bytes, got {value!r} ({type(value).__name__})")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what} must be a finite number > 0, got {value!r}")
    return int(value) if isinstance(value, numbers.Integral) else float(value)


def check_runtime_bytes(value):
    """Return `runtime_bytes` (the engine's own bytes inside the budget) as an int or float:
    TypeError unless it is a real number (not a bool), ValueError unless it is finite and >= 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"runtime_bytes must be a number of bytes, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"runtime_bytes must be a finite number >= 0, got {value!r}")
    return int(value) if isinstance(value, numbers.Integral) else float(value)


def find_course_root(start=None):
    """The nearest directory at or above `start` (default: the cwd) holding course.toml, or None."""
    here = Path(start if start is not None else os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "course.toml").is_file():
            return folder
    return None


def hardware_tables(path=None):
    """course.toml's [hardware] tables as tomllib reads them, and where they came from.

    `path` is course.toml or the folder holding it. By default course.toml is looked for at and
    above the cwd, and when there is none the release's copy in the first cell (COURSE_HARDWARE)
    is used, so the notebook also works opened alone (Colab straight from GitHub). Returns
    (tables, source), `source` naming the file or the copy for error messages. Raises
    FileNotFoundError when the path given does not exist, or when no course.toml is found and
    there is no copy to use instead.
    """
    if path is None:
        root = find_course_root()
        if root is None and COURSE_HARDWARE:
            copied = json.loads(json.dumps(COURSE_HARDWARE))  # a fresh copy the caller may edit
            return copied, "the copy of course.toml's [hardware] in this notebook's first cell"
        if root is None:
            raise FileNotFoundError(
                f"course.toml not found in {os.getcwd()} or any folder above it, and this "
                "notebook has no copy of its [hardware] tables (COURSE_HARDWARE is empty). Open "
                "the released notebook, exercises/m9_roofline, or a checkout of the course "
                "repository."
            )
        path = root / "course.toml"
    toml_file = Path(path)
    if toml_file.is_dir():
        toml_file = toml_file / "course.toml"
    if not toml_file.is_file():
        raise FileNotFoundError(
            f"{toml_file} does not exist: give load_hardware the path of course.toml (or its "
            "folder), or no path at all to use the one found from the working folder"
        )
    with toml_file.open("rb") as fh:
        return tomllib.load(fh).get("hardware"), str(toml_file)


def default_metrics_path():
    """`<repository root>/metrics.json`, or `./metrics.json` when no course.toml is found."""
    root = find_course_root()
    return (root if root is not None else Path(os.getcwd())) / "metrics.json"


def check_gpu(gpu, keys):
    """Check the figures `keys` of a gpu dict (see load_hardware), by the error convention.

    TypeError unless `gpu` is a dict; ValueError when one of `keys` is missing. Each figure:
    TypeError unless it is a real number (sm_count: an int), ValueError unless it is finite and
    positive (usable_memory_fraction: also at most 1). Keys not asked for are not looked at.
    """
    if not isinstance(gpu, dict):
        raise TypeError(f"gpu must be a dict like load_hardware()['T4'], got {type(gpu).__name__}")
    for key in keys:
        if key not in gpu:
            raise ValueError(f"gpu dict is missing {key!r} (see load_hardware)")
        value = gpu[key]
        if key == "sm_count":
            check_int(value, "gpu['sm_count']", 1)
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"gpu[{key!r}] must be a number, got {value!r}")
        if not math.isfinite(value) or value <= 0:
            raise ValueError(f"gpu[{key!r}] must be a positive number, got {value!r}")
        if key == "usable_memory_fraction" and value > 1:
            raise ValueError(f"gpu['usable_memory_fraction'] must be at most 1, got {value!r}")


_BOUND = re.compile(r"\b(bandwidth|memory)[- ](bound|limited)\b")
_NEGATION = re.compile(r"(\bnot|\bnever|\bno longer|n't)\W+(\w+\W+){0,2}$")


def says_bandwidth_bound(line):
    """True when `line` calls something bandwidth-bound and no such claim is negated.

    The claim is one of "bandwidth-bound", "memory-bound", "bandwidth-limited" or
    "memory-limited" (a space may replace the hyphen, any case); it counts as negated when
    "not", "never", "no longer" or a word ending in "n't" comes at most three words before it.
    """
    text = line.lower()
    claims = list(_BOUND.finditer(text))
    return bool(claims) and not any(_NEGATION.search(text[: m.start()]) for m in claims)


def self_check(ok, message):
    """Self-check helper: an AssertionError with `message` unless `ok`."""
    if not ok:
        raise AssertionError(message)


def expect_error(error, call, what):
    """Self-check helper: fail unless `call()` raises `error` (TypeError or ValueError)."""
    try:
        call()
    except error:
        return
    except (TypeError, ValueError) as exc:
        raise AssertionError(
            f"{what} raised {type(exc).__name__}; expected {error.__name__}"
        ) from None
    raise AssertionError(f"{what} should raise {error.__name__}")


# %% [markdown]
# ## 1. Check the config before you trust it
#
# Every function below starts from a config dict, so we check it once, carefully, in one place.
# A good error message names the key and says what was expected. Following the notebook's
# convention, raise `TypeError` when:
#
# * `cfg` is not a dict;
# * one of the six integer keys is not an `int` (a `bool` and a float such as `128.0` do not
#   count);
# * `tied_embeddings` is not a `bool`, or `name` (when present) is not a `str`;
#
# and raise `ValueError` when:
#
# * `cfg` has a key outside `CONFIG_KEYS + OPTIONAL_CONFIG_KEYS`, or lacks one of `CONFIG_KEYS`;
# * one of the six integer keys is not positive;
# * `dim` is not a multiple of `n_heads` (heads split the width evenly), or `n_heads` is not a
#   multiple of `n_kv_heads` (each K/V head serves the same number of query heads).
#
# `check_int` does half of this for you.

# %% deletable=false nbgrader={"grade": false, "grade_id": "validate_config", "locked": false, "schema_version": 3, "solution": true, "task": false, "checksum": "89cd874b863ef0f1205087d0b94011b4", "cell_type": "code"}
def validate_config(cfg):
    """Raise ValueError (naming the offending key) unless `cfg` is a valid model config.

    Returns None. Accepts the keys in CONFIG_KEYS (all required) and OPTIONAL_CONFIG_KEYS.
    A wrong type (cfg not a dict, a non-int size, a non-bool tied_embeddings, a non-str name)
    raises TypeError instead.
    """
    # YOUR CODE HERE
    raise NotImplementedError("validate_config: implement this (see the docstring)")


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "check_validate_config", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false, "checksum": "f080cc8379902dd9e2f0d047e6f57a4b", "cell_type": "code"}
def _check_validate_config():
    validate_config(COURSE_MODEL)
    validate_config(LLAMA3_8B)
    for broken, error in (
        ({**COURSE_MODEL, "n_layer": 4}, ValueError),  # unknown key (a typo)
        ({k: v for k, v in COURSE_MODEL.items() if k != "dim"}, ValueError),  # missing key
        ({**COURSE_MODEL, "n_layers": 0}, ValueError),  # not positive
        ({**COURSE_MODEL, "n_heads": 3}, ValueError),  # 128 % 3 != 0
        ({**COURSE_MODEL, "n_kv_heads": 3}, ValueError),  # 4 % 3 != 0
        ({**COURSE_MODEL, "dim": 128.0}, TypeError),  # not an int
        ({**COURSE_MODEL, "n_layers": True}, TypeError),  # a bool is not an int
        ({**COURSE_MODEL, "tied_embeddings": 1}, TypeError),  # not a bool
        ([("dim", 128)], TypeError),  # not a dict
    ):
        expect_error(error, lambda cfg=broken: validate_config(cfg), f"validate_config({broken})")


_check_validate_config()
del _check_validate_config
print("validate_config: self-checks passed")


# %% [markdown]
# ## 2. Count the parameters
#
# Walk through one block of a LLaMA-style decoder and write down every weight matrix (there are no
# biases). With `head_dim = dim // n_heads` and `kv_dim = n_kv_heads * head_dim`:
#
# | where | weights | count |
# |---|---|---|
# | token embedding | `vocab_size x dim` | `vocab_size * dim` |
# | attention, per layer | `wq`, `wo`: `dim x dim` each; `wk`, `wv`: `dim x kv_dim` each | `2*dim*dim + 2*dim*kv_dim` |
# | SwiGLU MLP, per layer | `w1`, `w3`: `dim x ffn`; `w2`: `ffn x dim` | `3*dim*ffn_hidden_dim` |
# | RMSNorm, per layer | one gain vector before attention, one before the MLP | `2*dim` |
# | final RMSNorm | one gain vector | `dim` |
# | output head | `dim x vocab_size`, unless it is tied to the embedding | `vocab_size * dim` or `0` |
#
# RoPE has no weights: the rotation angles are computed from positions. Grouped-query attention
# shows up only in `wk` and `wv`, which are `n_heads / n_kv_heads` times narrower than `wq`.

# %% deletable=false nbgrader={"grade": false, "grade_id": "num_params", "locked": false, "schema_version": 3, "solution": true, "task": false, "checksum": "7aaa9b1c2ac77f5145c9467452de88d5", "cell_type": "code"}
def num_params(cfg):
    """Number of weights (an int) of the LLaMA-style model described by `cfg`.

    Counts the embedding, every layer's wq/wk/wv/wo, w1/w2/w3 and two RMSNorm gains, the final
    RMSNorm gain, and the output head unless `tied_embeddings` is True. Raises TypeError or
    ValueError for an invalid config (see validate_config).
    """
    # YOUR CODE HERE
    raise NotImplementedError("num_params: implement this (see the docstring)")


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "check_num_params", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false, "checksum": "2eadd02a959b4226122c7dc96efea434", "cell_type": "code"}
def _check_num_params():
    self_check(isinstance(num_params(COURSE_MODEL), int), "num_params must return a Python int")
    self_check(num_params(COURSE_MODEL) < 2_000_000, "the course model is small (under 2M weights)")
    # Llama-3-8B really has about 8.03 billion weights.
    self_check(
        abs(num_params(LLAMA3_8B) - 8.03e9) < 0.01e9,
        f"Llama-3-8B has about 8.03e9 weights, got {num_params(LLAMA3_8B):,}",
    )
    # Untying the output head adds exactly one more vocab x dim matrix.
    untied = {**COURSE_MODEL, "tied_embeddings": False}
    self_check(
        num_params(untied) - num_params(COURSE_MODEL) == 4096 * 128,
        "an untied output head adds one vocab_size x dim matrix",
    )
    # A two-layer, one-head toy you can count on paper: 4*4 + 2*(2*16 + 2*16 + 3*4*8 + 2*4) + 4
    toy = {
        "dim": 4,
        "n_layers": 2,
        "n_heads": 1,
        "n_kv_heads": 1,
        "vocab_size": 4,
        "ffn_hidden_dim": 8,
        "tied_embeddings": True,
    }
    self_check(
        num_params(toy) == 16 + 2 * (32 + 32 + 96 + 8) + 4,
        f"the two-layer toy has 356 weights, got {num_params(toy)}",
    )


_check_num_params()
del _check_num_params
print("num_params: self-checks passed")


# %% [markdown]
# ### Not every weight is multiplied
#
# The embedding table is special. At the input, a token id *selects* one row of it: a lookup
# that reads `dim` numbers, not a matrix product. When the embeddings are **tied**, the same
# table is also the output head, which does multiply the whole `vocab_size x dim` matrix by the
# hidden state to score every token, so all of it is read and used once per step. When they are
# **untied**, the input table is only ever looked up, and a decode step reads and multiplies the
# other weights alone:
#
# $$\text{matmul params} = \text{num\_params} - \begin{cases} 0 & \text{tied} \\
# \text{vocab\_size} \cdot \text{dim} & \text{untied} \end{cases}$$
#
# The RMSNorm gains stay in: they are tiny, and each is read and used once per token like a
# weight. For Llama-3-8B (untied, a vocabulary of 128,256) the difference is 525 million of its
# 8.03 billion weights: a decode step multiplies about 7.5 billion. The lookup's own traffic,
# `dim x dtype_bytes` per sequence, is a few kilobytes and is left out everywhere below. Memory
# is another matter: the input table has to be resident even if only rows of it are read, so
# the capacity checks of section 8 count **every** parameter.

# %% deletable=false nbgrader={"grade": false, "grade_id": "matmul_params", "locked": false, "schema_version": 3, "solution": true, "task": false, "checksum": "40bfbdc6c145863b36f8b0f927ea0a32", "cell_type": "code"}
def matmul_params(cfg):
    """Number of weights (an int) a decode step reads and multiplies: num_params(cfg), less the
    input embedding table (vocab_size * dim) when tied_embeddings is False.

    Raises TypeError or ValueError for an invalid config (see validate_config).
    """
    # YOUR CODE HERE
    raise NotImplementedError("matmul_params: implement this (see the docstring)")


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "check_matmul_params", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false, "checksum": "fef96636f9e8de8557a3acd2b865e43b", "cell_type": "code"}
def _check_matmul_params():
    self_check(
        matmul_params(COURSE_MODEL) == num_params(COURSE_MODEL),
        "tied embeddings: the output head multiplies the whole table, so every weight counts",
    )
    self_check(
        matmul_params(LLAMA3_8B) == num_params(LLAMA3_8B) - 128256 * 4096,
        f"untied: the input table is a lookup; got {matmul_params(LLAMA3_8B):,}",
    )
    self_check(type(matmul_params(LLAMA3_8B)) is int, "matmul_params returns a Python int")


_check_matmul_params()
del _check_matmul_params
print("matmul_params: self-checks passed")


# %% [markdown]
# ## 3. The KV cache: bytes per token of context
#
# While generating, the model keeps the keys and values of every earlier token so it does not
# recompute them. For **each token** in the context, **each layer** stores one key vector and one
# value vector per **K/V head**, each `head_dim` numbers long:
#
# $$\text{KV bytes per token} = 2 \times n_\text{layers} \times n_\text{kv\_heads} \times
# \text{head\_dim} \times \text{dtype\_bytes}$$
#
# (the leading 2 is "K and V"; `dtype_bytes` is the size of one cached number: 2 for fp16/bf16,
# 1 for an 8-bit cache). Grouped-query attention exists precisely to shrink this number:
# Llama-3-8B has 32 query heads but caches only 8 K/V heads.
#
# Computed as written, the result is an `int` when `dtype_bytes` is an int and a `float` when it
# is a float (`0.5` for a 4-bit cache): return it that way.
#
# At every decode step the attention of the new token reads the whole cache, so a sequence with
# `context_len` tokens costs `context_len x KV bytes per token` of extra DRAM traffic per step.

# %% deletable=false nbgrader={"grade": false, "grade_id": "kv_bytes_per_token", "locked": false, "schema_version": 3, "solution": true, "task": false, "checksum": "f191937b414bff002559cdc87789d3e6", "cell_type": "code"}
def kv_bytes_per_token(cfg, dtype_bytes=2):
    """Bytes of K and V cached for one token, summed over all layers and K/V heads.

    `dtype_bytes` is the size of one cached number in bytes (2 for fp16/bf16, 0.5 for 4-bit), a
    positive int or float. Returns an int when dtype_bytes is an int, else a float. Raises
    TypeError or ValueError for an invalid config or dtype_bytes.
    """
    # YOUR CODE HERE
    raise NotImplementedError("kv_bytes_per_token: implement this (see the docstring)")


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "check_kv_bytes_per_token", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false, "checksum": "caf710b89989ecc46cbc63f154a023db", "cell_type": "code"}
def _check_kv_bytes_per_token():
    # 2 (K,V) x 4 layers x 2 KV heads x 32 channels x 2 bytes
    self_check(
        kv_bytes_per_token(COURSE_MODEL) == 1024, "course model: 2 x 4 x 2 x 32 x 2 = 1024 bytes"
    )
    # Llama-3-8B: 128 KiB per token in fp16, so an 8192-token context is a full 1 GiB per sequence.
    self_check(
        kv_bytes_per_token(LLAMA3_8B) == 128 * 1024, "Llama-3-8B: 2 x 32 x 8 x 128 x 2 bytes"
    )
    self_check(kv_bytes_per_token(COURSE_MODEL, dtype_bytes=4) == 2048, "fp32 doubles the bytes")
    self_check(type(kv_bytes_per_token(COURSE_MODEL)) is int, "an int size gives an int")
    half = kv_bytes_per_token(COURSE_MODEL, dtype_bytes=0.5)
    self_check(type(half) is float and half == 256.0, f"a 4-bit cache: 256.0 bytes, got {half!r}")
    for bad, error in (
        (0, ValueError),
        (-2, ValueError),
        (float("nan"), ValueError),
        ("2", TypeError),
        (True, TypeError),
    ):
        expect_error(
            error,
            lambda bad=bad: kv_bytes_per_token(COURSE_MODEL, dtype_bytes=bad),
            f"kv_bytes_per_token(cfg, dtype_bytes={bad!r})",
        )


_check_kv_bytes_per_token()
del _check_kv_bytes_per_token
print("kv_bytes_per_token: self-checks passed")


# %% [markdown]
# ## 4. Arithmetic intensity of one decode step
#
# **FLOPs.** Producing one token means pushing one vector through every weight matrix. Each
# weight that is multiplied takes part in one multiply and one add, so a decode step costs about
# $2 \times \text{matmul params}$ FLOPs **per sequence** (section 2: the untied input table is a
# lookup and costs none). With a batch of `batch` sequences decoded together, that is
# $2 \times \text{matmul params} \times \text{batch}$.
#
# Attention over the cache adds work the weights do not count: per layer, the new token's query
# meets every cached key ($2 \cdot \text{dim} \cdot \text{context\_len}$ FLOPs for the scores, all
# heads together) and the scores weight every cached value (as many again), so
# $4 \cdot n_\text{layers} \cdot \text{dim} \cdot \text{context\_len}$ FLOPs per sequence. For
# the course model at 512 tokens that is $4 \cdot 4 \cdot 128 \cdot 512 \approx 1.05$ MFLOP
# against $2 \cdot \text{matmul params} \approx 2.6$ MFLOP, so counting it would raise the batch-1
# intensity by 40% (from 0.833 to 1.167 FLOP/byte); for Llama-3-8B at 512 tokens it adds about
# 2%. The milestone's single number leaves it out **by design**, so that each function here has
# one formula you can check by hand, and 40% more of almost nothing is still almost nothing: the
# point stays two hundred times left of the ridge. Section 10 splits the step into its kernels
# and counts attention there.
#
# **Bytes.** The weights are read from DRAM once per step, **shared by the whole batch**:
# $\text{matmul params} \times \text{dtype\_bytes}$. The KV cache is not shared: each sequence
# reads its own, $\text{context\_len} \times \text{KV bytes per token}$. So, writing $P$ for the
# matmul params and KV for the KV bytes per token,
#
# $$\text{bytes} = P \cdot \text{dtype\_bytes} + \text{batch} \cdot \text{context\_len} \cdot
# \text{KV}$$
#
# $$\text{intensity} = \frac{\text{FLOPs}}{\text{bytes}}
# = \frac{2 \cdot P \cdot \text{batch}}{P \cdot \text{dtype\_bytes}
# + \text{batch} \cdot \text{context\_len} \cdot \text{KV}}$$
#
# Look at batch 1 with an empty cache: 2 FLOPs per weight and 2 bytes per fp16 weight, so the
# intensity is **1 FLOP/byte**. With a cache it is even lower. That single number is why
# decoding one sequence at a time is slow on every GPU ever built.

# %% deletable=false nbgrader={"grade": false, "grade_id": "decode_intensity", "locked": false, "schema_version": 3, "solution": true, "task": false, "checksum": "8b9bde832fdca7f408487c925a5fef28", "cell_type": "code"}
def decode_intensity(cfg, batch, context_len, dtype_bytes=2):
    """Arithmetic intensity (FLOP/byte, a float) of one decode step.

    With P = matmul_params(cfg): FLOPs = 2 * P * batch; bytes = P * dtype_bytes
    + batch * context_len * kv_bytes_per_token(cfg, dtype_bytes).
    `batch` is the number of sequences decoded together (an int >= 1), `context_len` the number of
    tokens already in each sequence's KV cache (an int >= 0; 0 means no KV traffic), `dtype_bytes`
    the bytes per weight and per cached number (a positive int or float). Raises TypeError for a
    wrong type, ValueError for a value out of range.
    """
    # YOUR CODE HERE
    raise NotImplementedError("decode_intensity: implement this (see the docstring)")


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "check_decode_intensity", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false, "checksum": "a007112182257b733ceffcea8e49727e", "cell_type": "code"}
def _check_decode_intensity():
    # No KV traffic, fp16: exactly 1 FLOP/byte at batch 1, and batch FLOP/byte in general.
    self_check(decode_intensity(COURSE_MODEL, 1, 0) == 1.0, "no cache, fp16, batch 1: 1 FLOP/byte")
    self_check(decode_intensity(COURSE_MODEL, 8, 0) == 8.0, "no cache, fp16: the batch")
    self_check(decode_intensity(COURSE_MODEL, 1, 0, 0.5) == 4.0, "4-bit weights: 4 FLOP/byte")
    # The KV cache only ever lowers the intensity, and batching only ever raises it.
    self_check(decode_intensity(COURSE_MODEL, 1, CONTEXT_LEN) < 1.0, "the cache adds bytes only")
    curve = [decode_intensity(COURSE_MODEL, b, CONTEXT_LEN) for b in (1, 2, 8, 32, 1024)]
    self_check(
        all(a < b for a, b in zip(curve[:-1], curve[1:], strict=True)),
        f"the intensity must grow with the batch, got {curve}",
    )
    self_check(
        isinstance(decode_intensity(LLAMA3_8B, 1, CONTEXT_LEN), float), "return a Python float"
    )
    # Llama-3-8B multiplies 7.5e9 weights (its input table is a lookup): 15.0 GB of fp16 a step.
    self_check(
        decode_intensity(LLAMA3_8B, 1, 0) == 1.0,
        "no cache, fp16, batch 1: 1 FLOP/byte, tied or not",
    )
    for args, error in (
        ((0, 16), ValueError),
        ((1, -1), ValueError),
        ((1.5, 16), TypeError),
        ((1, 16, 0), ValueError),
        ((1, 16, "2"), TypeError),
    ):
        expect_error(
            error,
            lambda args=args: decode_intensity(COURSE_MODEL, *args),
            f"decode_intensity(cfg, *{args})",
        )


_check_decode_intensity()
del _check_decode_intensity
print("decode_intensity: self-checks passed")


# %% [markdown]
# ## 5. The ridge, and the batch that reaches it
#
# A GPU's **ridge point** is the intensity at which its two limits meet:
#
# $$\text{ridge} = \frac{\text{peak FLOP/s}}{\text{peak byte/s}}$$
#
# Below the ridge a kernel waits for memory (bandwidth-bound); above it, it waits for arithmetic
# (compute-bound). The course GPU is the T4: 65 TFLOP/s of fp16 tensor-core math and 320 GB/s of
# GDDR6, so its ridge is $65 \times 10^{12} / 320 \times 10^{9} \approx 203$ FLOP/byte. Batch-1
# decode sits near 1 FLOP/byte, two hundred times to the left: the tensor cores idle more than 99%
# of the time, and at a fixed number of bytes per weight no kernel tuning can change that,
# because the bytes have to be read. Only fewer bytes per weight (quantisation) or more tokens
# per read (batching, speculation) move the point.
#
# **The datasheet ridge is not the one you meet.** The 65 TFLOP/s are a peak the T4 cannot hold
# under its 70 W power cap: on long fp16 GEMMs it sustains about 24 TFLOP/s (course.toml keeps
# that figure as `sustained_fp16_tflops`, for the plots of section 16), and its GDDR6 about
# 240 GB/s (three quarters of 320). The *practical* ridge is then about
# $24 \times 10^{12} / 240 \times 10^{9} = 100$ FLOP/byte (75 against the datasheet bandwidth):
# half the datasheet's. Everything graded here uses the datasheet ridge, as `course.toml` gives
# it, because that is the number both you and the grader can compute; when you read a crossover
# batch, remember that a real T4 turns compute-bound at roughly half of it.
#
# **The roof depends on the precision of the arithmetic.** The flat roof is the tensor cores'
# peak *for the format they multiply in*. The T4 does 65 TFLOP/s in fp16 and 130 TOPS in INT8;
# an H100 989 TFLOP/s in bf16 and 1,979 in FP8 (`int8_tensor_tops` and `fp8_tensor_tflops` in
# course.toml). Quantisation can change either side of the ridge:
#
# * **W4A16** (4-bit weights, 16-bit activations, the usual way to fit a model on a small GPU)
#   dequantises the weights and multiplies in fp16: the roof, and the ridge, stay the fp16 ones;
#   only the bytes shrink, so the intensity of a weight matmul is four times that of fp16
#   weights (twice that of 8-bit ones) and it turns compute-bound at the same ridge at a
#   quarter of fp16's batch;
# * **W8A8** (8-bit weights *and* activations, FP8 on Hopper, INT8 elsewhere) multiplies in
#   8 bits: the roof doubles with the bytes halved, so the H100's 8-bit ridge is
#   $1979 \times 10^{12} / 3.35 \times 10^{12} \approx 591$ FLOP/byte, twice its bf16 one.
#
# Everything graded here takes the roof it is given, `peak_flops` (the fp16 one from
# `load_hardware`, unless you pass another).
#
# **Batching** is the cure the serving systems use: the weights are read once and reused by every
# sequence in the batch, so the FLOPs grow with the batch while the weight bytes do not. But the
# KV term grows with the batch too. Divide the top and bottom of the intensity by `batch` and let
# the batch grow:
#
# $$\lim_{\text{batch}\to\infty} \text{intensity} =
# \frac{2 \cdot P}{\text{context\_len} \cdot \text{KV bytes per token}}$$
#
# ($P$ is `matmul_params(cfg)`, as in section 4.)
#
# If that ceiling is at or below the ridge, **no batch ever reaches it**, and the right answer is
# `None`, not a large number. Otherwise, solving $\text{intensity}(b) \ge \text{ridge}$ for $b$
# gives
#
# $$b \ge \frac{\text{ridge} \cdot P \cdot \text{dtype\_bytes}}
# {2 \cdot P - \text{ridge} \cdot \text{context\_len} \cdot \text{KV}}$$
#
# and the answer is the smallest integer that satisfies it. Floating point can put a value that
# should land exactly on the boundary one step off, so finish by checking your `b` against
# `decode_intensity`: it must reach the ridge, and `b - 1` (if `b > 1`) must not.

# %% deletable=false nbgrader={"grade": false, "grade_id": "crossover_batch", "locked": false, "schema_version": 3, "solution": true, "task": false, "checksum": "41c02f33dd52289da1bf255708dfcc2b", "cell_type": "code"}
def crossover_batch(cfg, ridge, context_len, dtype_bytes=2):
    """Smallest batch (an int >= 1) whose decode intensity is >= `ridge`, or None if none is.

    `ridge` is the GPU's ridge point in FLOP/byte (a positive number), `context_len` the tokens
    in each sequence's KV cache (an int >= 0; with 0 there is no KV traffic and a crossover always
    exists). Returns None when the intensity's limit 2*matmul_params / (context_len * KV bytes per
    token) is <= ridge. The result agrees with decode_intensity: intensity(b) >= ridge and, for
    b > 1, intensity(b - 1) < ridge. Raises TypeError when ridge is not a real number (a bool is
    not), ValueError when it is not finite and positive, and as decode_intensity otherwise.
    """
    # YOUR CODE HERE
    raise NotImplementedError("crossover_batch: implement this (see the docstring)")


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "check_crossover_batch", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false, "checksum": "12e2d2f3e07489867b0b952b586d3ba8", "cell_type": "code"}
def _check_crossover_batch():
    # Without a KV cache the fp16 intensity is exactly `batch`, so the crossover is ceil(ridge).
    self_check(crossover_batch(COURSE_MODEL, 100.0, 0) == 100, "no cache: ceil(ridge)")
    self_check(crossover_batch(COURSE_MODEL, 100.5, 0) == 101, "no cache: ceil(ridge)")
    self_check(crossover_batch(COURSE_MODEL, 100.0, 0, 0.5) == 25, "4-bit: a quarter of it")
    # A ridge below the batch-1 intensity is crossed immediately.
    self_check(crossover_batch(COURSE_MODEL, 0.5, CONTEXT_LEN) == 1, "batch 1 reaches 0.5")
    # Llama-3-8B on a T4-like ridge of 203: crosses at a short context, never at a long one.
    b = crossover_batch(LLAMA3_8B, 203.125, 512)
    self_check(b is not None and 2000 < b < 2500, f"Llama-3-8B at 512 tokens: near 2,200, got {b}")
    self_check(
        decode_intensity(LLAMA3_8B, b, 512) >= 203.125 > decode_intensity(LLAMA3_8B, b - 1, 512),
        "the crossover must agree with decode_intensity: b reaches the ridge, b - 1 does not",
    )
    self_check(crossover_batch(LLAMA3_8B, 203.125, 8192) is None, "at 8192 tokens: None")
    # The course model's KV cache grows as fast as its FLOPs: no batch gets there at 512 tokens.
    self_check(
        crossover_batch(COURSE_MODEL, 203.125, CONTEXT_LEN) is None,
        "the course model's ceiling at 512 tokens is about 5 FLOP/byte: the answer is None",
    )
    for ridge, error in ((0, ValueError), (-1.0, ValueError), ("203", TypeError)):
        expect_error(
            error,
            lambda ridge=ridge: crossover_batch(COURSE_MODEL, ridge, CONTEXT_LEN),
            f"crossover_batch(cfg, ridge={ridge!r}, ...)",
        )


_check_crossover_batch()
del _check_crossover_batch
print("crossover_batch: self-checks passed")


# %% [markdown]
# ## 6. Read the hardware table from `course.toml`
#
# The figures of the course GPUs are kept in exactly one place, the `[hardware.<name>]` tables
# of `course.toml` at the repository root, in the units their sources quote:
#
# | key | unit | source |
# |---|---|---|
# | `fp16_tensor_tflops` | TFLOP/s (1e12 FLOP/s) | the vendor's dense peak |
# | `bandwidth_gbs` | GB/s (1e9 byte/s) | the vendor's peak |
# | `memory_mib` | MiB (2^20 bytes) | `nvidia-smi --query-gpu=memory.total` on the card |
# | `usable_memory_fraction` | a fraction in (0, 1] | the share of the card a serving engine's whole process may use (vLLM's `gpu_memory_utilization`) |
# | `sm_count` | SMs | the vendor |
#
# **Memory is counted in binary units.** A T4 sold as "16 GB" and an H100 sold as "80 GB" hold
# binary gigabytes (GiB, 2^30 bytes), less what the driver and ECC keep: nvidia-smi shows
# 15,360 MiB on a T4 with ECC on and 81,559 MiB on an H100. Read "80 GB" as 80e9 bytes and you
# undercount the H100 by 5.5 GB: inside the same budget (section 8), 74 fewer 512-token
# Llama-3-8B sequences, 785 instead of 859. A serving engine then caps its **whole process** at
# a fraction of the card (vLLM's `gpu_memory_utilization`, 0.9 by default): the weights, the
# activations, the CUDA context, its graphs and workspaces all come out of that 90%, and the KV
# cache gets what is left. The other 10% is headroom for everything outside the engine's
# accounting (other processes, the allocator's fragmentation), not a place for the runtime.
#
# Typing figures into a notebook by hand is how two numbers that should agree end up disagreeing,
# so read them instead (the copy in the first cell is generated from `course.toml` by the
# release, never typed), and convert to plain units (FLOP/s, byte/s, bytes) once, at the boundary.
#
# Where the tables come from is settled for you: the first line of `load_hardware` calls the
# provided `hardware_tables(path)`, which reads `course.toml` (found by walking up from the
# current directory unless you give a path; `FileNotFoundError` when the file you name does not
# exist) or, in a notebook opened on its own, the copy the release wrote into the first cell from
# that same file. It returns the tables as `tomllib` parses them, a dict such as
# `{"T4": {"fp16_tensor_tflops": 65.0, ...}, ...}`, and a `source` string naming where they came
# from, for your error messages.
#
# Your part is the boundary: turn those tables into one dict per GPU with exactly six keys:
#
# * `"name"`: the table's key, such as `"T4"`;
# * `"peak_flops"`: FLOP/s, a float (`fp16_tensor_tflops * 1e12`);
# * `"peak_bandwidth"`: byte/s, a float (`bandwidth_gbs * 1e9`);
# * `"memory_bytes"`: bytes, an int (`memory_mib * 2**20`);
# * `"usable_memory_fraction"`: a float, as in the table;
# * `"sm_count"`: an int, as in the table.
#
# When there are no tables, or a table lacks one of the five figures or has one that is not a
# positive number (`memory_mib` and `sm_count`: a positive int; `usable_memory_fraction`: at
# most 1), raise `ValueError` naming the table and the key. What a file holds is data, not an
# argument, so a figure of the wrong type there is a `ValueError` too. Other keys of a table
# (`fp32_tflops`, the `sm` limits, ...) are not your concern here.

# %% deletable=false nbgrader={"grade": false, "grade_id": "load_hardware", "locked": false, "schema_version": 3, "solution": true, "task": false, "checksum": "6473fc86d6bc46cef5a6f7320565ea49", "cell_type": "code"}
def load_hardware(path=None):
    """Read the [hardware.*] tables of course.toml into {short_name: gpu dict}.

    Each gpu dict is {"name": short_name, "peak_flops": FLOP/s (fp16 tensor), "peak_bandwidth":
    byte/s, "memory_bytes": bytes (an int, memory_mib * 2**20), "usable_memory_fraction": float,
    "sm_count": int}. `path` is course.toml or the folder holding it; by default course.toml is
    found by walking up from the current directory, or the notebook's copy of its tables is used
    (see hardware_tables). Raises FileNotFoundError when a path is given that does not exist (or
    there is neither a course.toml nor a copy), ValueError when there are no tables or an entry
    lacks a figure or has an invalid one.
    """
    table, source = hardware_tables(path)  # course.toml's [hardware], or the notebook's copy
    # YOUR CODE HERE
    raise NotImplementedError("load_hardware: implement this (see the docstring)")


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "check_load_hardware", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false, "checksum": "c83966058f9778dc73dba8a2e3c419c2", "cell_type": "code"}
def _check_load_hardware():
    hw = load_hardware()
    self_check(COURSE_GPU in hw, f"course.toml defines {sorted(hw)}; {COURSE_GPU} is missing")
    t4 = hw[COURSE_GPU]
    keys = {
        "name",
        "peak_flops",
        "peak_bandwidth",
        "memory_bytes",
        "usable_memory_fraction",
        "sm_count",
    }
    self_check(set(t4) == keys, f"each gpu dict has exactly the keys {sorted(keys)}: {sorted(t4)}")
    self_check(t4["name"] == COURSE_GPU, f"the name is the table's key, {COURSE_GPU!r}")
    # SI units: tens of TFLOP/s are 1e13-ish FLOP/s, hundreds of GB/s are 1e11-ish byte/s.
    self_check(
        1e13 < t4["peak_flops"] < 1e15 and 1e11 < t4["peak_bandwidth"] < 1e13,
        "convert TFLOP/s and GB/s to FLOP/s and byte/s",
    )
    self_check(
        t4["memory_bytes"] == 15360 * 2**20 and type(t4["memory_bytes"]) is int,
        f"the T4's 15,360 MiB are 15,360 x 2**20 bytes (an int), got {t4['memory_bytes']!r}",
    )
    self_check(t4["usable_memory_fraction"] == 0.9 and t4["sm_count"] == 40, "0.9 and 40 SMs")
    self_check(round(t4["peak_flops"] / t4["peak_bandwidth"]) == 203, "the T4 ridge is about 203")
    expect_error(
        FileNotFoundError,
        lambda: load_hardware(Path(tempfile.gettempdir()) / "no-such-folder" / "course.toml"),
        "load_hardware(a course.toml that does not exist)",
    )


_check_load_hardware()
del _check_load_hardware
print("load_hardware: self-checks passed")


# %% [markdown]
# ## 7. The milestone record
#
# Now put it together. For a config, a GPU (a dict as returned by `load_hardware`) and a context
# length, compute the intensities at batch 1, 8 and 32, the crossover batch against the GPU's
# ridge, and a **one-line conclusion** a reader can check against the numbers. The conclusion is a
# single line (no newline) that names batch 1 (written `batch 1` or `batch-1`) and says how it
# compares with the ridge. When batch 1 is below the ridge, the conclusion must call it
# bandwidth-bound and `says_bandwidth_bound(conclusion)` must be True: it names the regime as
# "bandwidth-bound", "memory-bound", "bandwidth-limited" or "memory-limited" (a space may replace
# the hyphen), and no "not", "never", "no longer" or "...n't" stands in the three words before
# that claim, so "compute-bound, not memory-bound" does not count. It should also quote the
# intensity and the ridge.
#
# The record also carries everything needed to recompute it: `params`, `context_len`,
# `dtype_bytes`, the `gpu` dict and the `model` config itself. The autograder redoes the arithmetic
# from those fields with its own copy of the hardware table, so a record whose numbers do not follow
# from its inputs will not pass.

# %% deletable=false nbgrader={"grade": false, "grade_id": "m9_record", "locked": false, "schema_version": 3, "solution": true, "task": false, "checksum": "9d53e6e261f11e0541ac5d37b72fff09", "cell_type": "code"}
def m9_record(cfg, gpu, context_len, dtype_bytes=2):
    """The dict to store as metrics.json["m9_roofline"].

    `gpu` is {"name": str, "peak_flops": FLOP/s, "peak_bandwidth": byte/s, ...} (extra keys such
    as memory_bytes are kept). Returns the keys
    intensity_b1, intensity_b8, intensity_b32 (FLOP/byte, floats), crossover_batch (int or None,
    against the ridge peak_flops / peak_bandwidth), conclusion (one line of text), params (int),
    context_len, dtype_bytes, gpu (a copy of the gpu dict) and model (a copy of cfg). Raises
    TypeError or ValueError for an invalid config, gpu dict (gpu["name"] must be a non-empty str)
    or argument.
    """
    # YOUR CODE HERE
    raise NotImplementedError("m9_record: implement this (see the docstring)")


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "check_m9_record", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false, "checksum": "5d4621c2d092a351c074eb0522cc6fd1", "cell_type": "code"}
def _check_m9_record():
    toy_gpu = {"name": "toy", "peak_flops": 100.0, "peak_bandwidth": 1.0}  # ridge 100 FLOP/byte
    rec = m9_record(COURSE_MODEL, toy_gpu, CONTEXT_LEN)
    for key in (
        "intensity_b1",
        "intensity_b8",
        "intensity_b32",
        "crossover_batch",
        "conclusion",
        "params",
        "context_len",
        "dtype_bytes",
        "gpu",
        "model",
    ):
        self_check(key in rec, f"m9_record's dict lacks {key!r}")
    self_check(
        rec["intensity_b1"] == decode_intensity(COURSE_MODEL, 1, CONTEXT_LEN),
        "intensity_b1 must be decode_intensity(cfg, 1, context_len)",
    )
    self_check(
        rec["intensity_b32"] == decode_intensity(COURSE_MODEL, 32, CONTEXT_LEN),
        "intensity_b32 must be decode_intensity(cfg, 32, context_len)",
    )
    self_check(
        rec["crossover_batch"] == crossover_batch(COURSE_MODEL, 100.0, CONTEXT_LEN),
        "crossover_batch must be computed against the gpu's ridge, peak_flops / peak_bandwidth",
    )
    self_check(
        rec["params"] == num_params(COURSE_MODEL) and rec["model"] == COURSE_MODEL,
        "the record carries params and a copy of the config",
    )
    line = rec["conclusion"]
    self_check(isinstance(line, str) and "\n" not in line, "the conclusion is one line of text")
    self_check(re.search(r"batch[ -]1\b", line.lower()), f"the conclusion names batch 1: {line!r}")
    self_check(
        says_bandwidth_bound(line),
        f"batch 1 is below the ridge, so the conclusion calls it bandwidth-bound: {line!r}",
    )
    for text, want in (
        ("At batch 1 decode is memory bound", True),
        ("batch-1 decode is bandwidth-bound, not compute-bound", True),
        ("batch 1 is compute-bound, not memory-bound", False),
        ("batch 1 isn't really bandwidth-bound", False),
        ("batch 1 is limited by memory", False),
    ):
        self_check(says_bandwidth_bound(text) is want, f"says_bandwidth_bound({text!r}) is {want}")
    json.dumps(rec, allow_nan=False)  # plain JSON data, ready for metrics.json


_check_m9_record()
del _check_m9_record
print("m9_record: self-checks passed")


# %% [markdown]
# ## 8. Tokens per second, and whether it fits
#
# Intensity tells you *which* limit you hit. A serving engineer wants the number that follows from
# it: how many tokens per second a GPU can produce at best. One step of the whole batch can go no
# faster than either roof allows: it has to move its bytes, and it has to do its FLOPs,
#
# $$t_\text{step} \ge \max\left(\frac{\text{bytes per step}}{\text{peak\_bandwidth}},\;
# \frac{\text{FLOPs per step}}{\text{peak\_flops}}\right),$$
#
# with the bytes and FLOPs of section 4: $P \cdot \text{dtype\_bytes} + \text{batch} \cdot
# \text{context\_len} \cdot \text{KV}$ and $2 \cdot P \cdot \text{batch}$. Each step produces one
# token for each of the `batch` sequences, so the ceiling on the batch's combined rate is
# $\text{batch} / t_\text{step}$ tokens/s: the **lower** of the bandwidth ceiling and the compute
# ceiling $\text{peak\_flops} / (2 P)$. At batch 1 with an empty cache on the T4 the bandwidth
# ceiling is the lower one by far: $320 \times 10^9 / (2P)$, about 122,000 tokens/s for the
# course model (its 2.6 MB of weights) and 21.3 tokens/s for Llama-3-8B (15.0 GB multiplied per
# step). No kernel beats this bound, and real ones reach some fraction of it (section 12 names
# that fraction).
#
# **Weights and cache need not share a precision.** Serving systems often keep the weights in
# one format and the cache in another (8-bit K and V beside 16-bit weights, or 4-bit weights
# beside a 16-bit cache). So these functions take the weights' `dtype_bytes` and, separately,
# `kv_dtype_bytes`, the bytes of one cached number; `None` (the default) means "the same as
# `dtype_bytes`". The KV term is then $\text{batch} \cdot \text{context\_len} \cdot
# \text{kv\_bytes\_per\_token(cfg, kv\_dtype\_bytes)}$ and the weight term uses `dtype_bytes`
# alone: mixing them up is a classic bug.
#
# Batching raises the ceiling, but only while the batch fits in memory: **every** parameter (the
# input embedding table included: it is looked up, but it has to be resident) and every
# sequence's KV cache have to be on the GPU at once, and so does the engine itself. The fraction
# of section 6 caps the engine's whole process, so everything it allocates comes out of it:
#
# $$\text{weights} + \text{activations} + \text{runtime} + \text{KV} \le
# \text{usable\_memory\_fraction} \cdot \text{memory\_bytes}.$$
#
# This is how vLLM sizes its cache at start-up: it loads the weights, runs one forward pass of
# the largest batch it will schedule to measure the **activation peak**, adds the memory outside
# PyTorch's allocator (the **CUDA context**, cuBLAS and NCCL **workspaces**; since version 0.21
# it also estimates the **CUDA graphs'** pool, which older versions captured after sizing the
# cache, out of the headroom), and gives the KV cache whatever is left of the fraction. Its
# log for Llama-3-8B on an H100 (vLLM pull request 10511) reads 14.96 GiB of weights, 1.79 GiB
# outside PyTorch and a 1.26 GiB activation peak: about 3 GiB that is neither weights nor cache.
# The notebook calls the activations and the runtime together `runtime_bytes` and takes
# `RUNTIME_BYTES` = 3 GiB (set beside `CONTEXT_LEN`) as its default; it depends on the engine,
# the model and the largest batch more than on the card, so measure your own where you can.
# With $w$ = `dtype_bytes` and $R$ = `runtime_bytes`:
#
# $$\text{num\_params} \cdot w + R + \text{batch} \cdot \text{context\_len} \cdot
# \text{KV} \le \text{usable\_memory\_fraction} \cdot \text{memory\_bytes}.$$
#
# A crossover batch that does not fit is not a batch you can run. The other 10% is headroom for
# what the engine does not account for, not room for its runtime; the bound is first-order, not
# a promise.
#
# **Exercise.** Write `decode_tokens_per_s_bound(cfg, gpu, batch, context_len, dtype_bytes=2,
# kv_dtype_bytes=None)`, which returns the ceiling above as a Python `float` in tokens per second
# (for the whole batch, not per sequence), and `kv_cache_fits(cfg, gpu, batch, context_len,
# dtype_bytes=2, kv_dtype_bytes=None, runtime_bytes=RUNTIME_BYTES)`, which returns a Python
# `bool`: `True` when the weights, the runtime and the batch's KV cache take at most
# `gpu["usable_memory_fraction"] * gpu["memory_bytes"]` bytes (exactly equal counts as
# fitting). `runtime_bytes` is a finite number >= 0 (`check_runtime_bytes` checks it; 0 is an
# engine that needs nothing). `gpu` is a dict as returned by `load_hardware`: the
# first function needs its `peak_flops` and `peak_bandwidth`, the second its `memory_bytes` and
# `usable_memory_fraction`; a missing or non-positive figure raises `ValueError` and a figure
# that is not a number `TypeError` (`check_gpu` does both). `batch` is an int >= 1,
# `context_len` an int >= 0, and the sizes follow the notebook's rule for bytes per number.
# Compare exactly: `0.9 * memory_bytes` in floating point is rounded, while
# `fractions.Fraction(x)` of each figure (and their products) is exact.

# %% deletable=false nbgrader={"grade": false, "grade_id": "decode_tokens_per_s_bound", "locked": false, "schema_version": 3, "solution": true, "task": false, "checksum": "0702f9c768e49db60b3d0c60a9ab5cad", "cell_type": "code"}
def decode_tokens_per_s_bound(cfg, gpu, batch, context_len, dtype_bytes=2, kv_dtype_bytes=None):
    """Roofline ceiling on the batch's decode rate, tokens/s (a float): the lower of both roofs.

    batch / max(step bytes / gpu["peak_bandwidth"], 2 * matmul_params * batch / gpu["peak_flops"])
    with step bytes = matmul_params * dtype_bytes + batch * context_len *
    kv_bytes_per_token(cfg, kv_dtype_bytes); kv_dtype_bytes=None means dtype_bytes.
    Raises TypeError or ValueError for an invalid config, gpu dict or argument.
    """
    # YOUR CODE HERE
    raise NotImplementedError("decode_tokens_per_s_bound: implement this (see the docstring)")


# %% deletable=false nbgrader={"grade": false, "grade_id": "kv_cache_fits", "locked": false, "schema_version": 3, "solution": true, "task": false, "checksum": "628648635ca0cb23d293b4a7f95763aa", "cell_type": "code"}
def kv_cache_fits(
    cfg, gpu, batch, context_len, dtype_bytes=2, kv_dtype_bytes=None, runtime_bytes=RUNTIME_BYTES
):
    """True when the weights, the engine's runtime and `batch` sequences' KV caches fit in the
    GPU's budget, gpu["usable_memory_fraction"] * gpu["memory_bytes"].

    Compares num_params * dtype_bytes + runtime_bytes + batch * context_len *
    kv_bytes_per_token(cfg, kv_dtype_bytes) with the budget, exactly (equal fits;
    kv_dtype_bytes=None means dtype_bytes; runtime_bytes, the activation peak, CUDA context,
    graphs and workspaces, is a number >= 0, RUNTIME_BYTES = 3 GiB by default). Returns a Python
    bool; raises TypeError or ValueError for invalid inputs.
    """
    # YOUR CODE HERE
    raise NotImplementedError("kv_cache_fits: implement this (see the docstring)")


# %% [markdown]
# The same inequality, solved for the batch, gives the **memory-capacity wall**: the largest
# batch whose caches fit beside the weights and the runtime,
#
# $$b_\text{max} = \left\lfloor \frac{\text{usable\_memory\_fraction} \cdot
# \text{memory\_bytes} - \text{num\_params} \cdot \text{dtype\_bytes} -
# \text{runtime\_bytes}}{\text{context\_len} \cdot \text{KV bytes per token}}
# \right\rfloor,$$
#
# or 0 when the weights and the runtime alone do not fit. Llama-3-8B in fp16 does not fit a
# T4's budget at all (16.06 GB of weights against 0.9 x 16.11 GB = 14.50 GB, before any
# runtime). On an H100 a 512-token sequence caches 64 MiB, so the 3 GiB runtime costs exactly 48
# sequences: the wall at 512 tokens is 859 (907 if the runtime lived outside the budget, as
# this notebook once taught). Compare walls on one basis only: with the runtime, 859 within 90%
# of the 81,559 MiB, 987 with the whole card, and 785 within 90% of "80 GB" read as 80e9 bytes
# (without it, 907, 1,035 and 833).
#
# **Exercise.** Write `max_batch_that_fits(cfg, gpu, context_len, dtype_bytes=2,
# kv_dtype_bytes=None, runtime_bytes=RUNTIME_BYTES)`: the Python `int` above (0 when even the
# weights and the runtime do not fit). `context_len` is an int >= 1 (with no cache the batch has
# no memory limit here); the sizes follow the notebook's rule; `runtime_bytes` is checked as in
# `kv_cache_fits`; `gpu` needs `memory_bytes` and `usable_memory_fraction`. Compute
# it exactly: a float division can land a hair under an integer and lose a whole sequence, so
# the grader checks that your batch fits and one more does not (`fractions.Fraction` of each
# figure is exact).

# %% deletable=false nbgrader={"grade": false, "grade_id": "max_batch_that_fits", "locked": false, "schema_version": 3, "solution": true, "task": false, "checksum": "1f5cf1322bc6b064fabac6db708254c0", "cell_type": "code"}
def max_batch_that_fits(
    cfg, gpu, context_len, dtype_bytes=2, kv_dtype_bytes=None, runtime_bytes=RUNTIME_BYTES
):
    """Largest batch (an int >= 0) whose KV caches of `context_len` tokens fit in the GPU's
    budget, usable_memory_fraction * memory_bytes, beside all num_params(cfg) weights and the
    engine's runtime_bytes; 0 when the weights and the runtime alone do not.

    dtype_bytes and kv_dtype_bytes are bytes per number (positive ints or floats: 0.5 is 4-bit;
    kv_dtype_bytes=None means dtype_bytes); runtime_bytes is a number >= 0 (RUNTIME_BYTES,
    3 GiB, by default). Raises TypeError or ValueError for invalid inputs (context_len must be
    an int >= 1).
    """
    # YOUR CODE HERE
    raise NotImplementedError("max_batch_that_fits: implement this (see the docstring)")


# %% [markdown]
# ### What "4-bit" really costs
#
# A 4-bit model is not half a byte a weight. Weight-only quantisation (GPTQ, AWQ and their
# kin) stores each group of 128 weights of a linear layer with a 16-bit scale and, in the
# asymmetric layout both default to, a zero point packed in 4 bits like the weights:
# $4 + (16 + 4)/128 \approx 4.16$ bits a weight. (Symmetric GPTQ drops the zero point,
# $4 + 16/128 = 4.125$; a 16-bit zero point would make it 4.25.) And it leaves the embedding,
# the output head and the norms in 16 bits. For Llama-3-8B, in the asymmetric layout, that is
#
# $$6.98 \times 10^9 \cdot \tfrac{4.156}{8} + 1.05 \times 10^9 \cdot 2 \approx 3.63 + 2.10
# = 5.73\ \text{GB},$$
#
# not the $8.03 \times 10^9 / 2 = 4.0$ GB of "half a byte each": an average of 0.71 bytes a
# weight for memory. A decode step reads less than that (the untied input table is a lookup):
# 4.68 GB, 0.62 bytes for each multiplied weight. The helper below does this sum for any
# config (`group_bits=20` is the asymmetric layout, 16 the symmetric one). On a T4 at 512 tokens
# with an 8-bit cache, within the budget and beside the 3 GiB runtime, the wall is then 165
# sequences, where the naive half a byte a weight would promise 216 (without the runtime: 261
# against 312).

# %%
def quantized_weight_bytes(cfg, bits, group_size=128, group_bits=20):
    """Bytes of `cfg`'s weights with every layer's linear weights (wq, wk, wv, wo, w1, w2, w3)
    quantised to `bits` bits, plus `group_bits` bits per group of `group_size` weights (20: the
    asymmetric GPTQ/AWQ layout, a 16-bit scale and a zero point packed in `bits` = 4 bits;
    symmetric GPTQ has no zero point, group_bits=16); the embedding, output head and norms stay
    16-bit.

    Returns {"resident": bytes of all weights, "read": bytes a decode step reads (less the
    looked-up input table when untied)}. Divide by num_params (resident) or matmul_params (read)
    for the average dtype_bytes to give the functions of this notebook.
    """
    every = num_params(cfg)  # validates cfg
    width, groups = cfg["dim"], cfg["n_heads"] // cfg["n_kv_heads"]
    per_layer = width * (2 * width + 2 * width // groups + 3 * cfg["ffn_hidden_dim"])
    linear = cfg["n_layers"] * per_layer
    per_weight = Fraction(bits, 8) + Fraction(group_bits, 8 * group_size)
    resident = linear * per_weight + 2 * (every - linear)
    lookup = 2 * cfg["vocab_size"] * width * (not cfg["tied_embeddings"])
    return {"resident": float(resident), "read": float(resident - lookup)}


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "check_serving", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false, "checksum": "502fa0b950d4801e750903ad7196f480", "cell_type": "code"}
def _check_serving():
    t4 = {
        "name": "T4",
        "peak_flops": 65e12,
        "peak_bandwidth": 320e9,
        "memory_bytes": 15360 * 2**20,
        "usable_memory_fraction": 0.9,
        "sm_count": 40,
    }
    rate = decode_tokens_per_s_bound(COURSE_MODEL, t4, 1, 0)
    self_check(type(rate) is float, f"decode_tokens_per_s_bound must return a float, got {rate!r}")
    want = 320e9 / (2 * matmul_params(COURSE_MODEL))
    self_check(abs(rate - want) < 1e-6 * rate, f"batch 1, no cache: {want:.6g} tokens/s")
    llama = decode_tokens_per_s_bound(LLAMA3_8B, t4, 1, 0)
    self_check(21 < llama < 21.5, f"Llama-3-8B on a T4: about 21.3 tokens/s, got {llama!r}")
    four_bit = decode_tokens_per_s_bound(LLAMA3_8B, t4, 1, 0, 0.5)
    self_check(abs(four_bit - 4 * llama) < 1e-6 * four_bit, "4-bit weights: four times the rate")
    # Past the crossover the compute roof binds: without a cache, batch 1000 > ridge 203.
    compute = decode_tokens_per_s_bound(COURSE_MODEL, t4, 1000, 0)
    want = 65e12 / (2 * matmul_params(COURSE_MODEL))
    self_check(abs(compute - want) < 1e-6 * compute, "batch 1000, no cache: the compute roof")
    self_check(
        decode_tokens_per_s_bound(COURSE_MODEL, t4, 8, CONTEXT_LEN)
        > decode_tokens_per_s_bound(COURSE_MODEL, t4, 1, CONTEXT_LEN),
        "a bigger batch shares the weight reads: the ceiling rises",
    )
    self_check(
        decode_tokens_per_s_bound(COURSE_MODEL, t4, 8, CONTEXT_LEN, 2, 1)
        > decode_tokens_per_s_bound(COURSE_MODEL, t4, 8, CONTEXT_LEN),
        "an 8-bit cache moves half the KV bytes: the ceiling rises",
    )
    self_check(kv_cache_fits(COURSE_MODEL, t4, 32, CONTEXT_LEN) is True, "the course model fits")
    self_check(
        kv_cache_fits(LLAMA3_8B, t4, 1, CONTEXT_LEN) is False,
        "Llama-3-8B's 16.06 GB of fp16 weights exceed 90% of a T4's 16.11 GB",
    )
    whole = {**t4, "usable_memory_fraction": 1.0}
    self_check(
        kv_cache_fits(LLAMA3_8B, whole, 1, 0, runtime_bytes=0) is True,
        "... and fit in the whole card only if no engine, context or activation needed a byte",
    )
    self_check(
        kv_cache_fits(LLAMA3_8B, whole, 1, 0) is False,
        "the runtime comes out of the budget too: with 3 GiB of it, not even the whole card",
    )
    exact = {
        **t4,
        "memory_bytes": 2 * num_params(COURSE_MODEL) + 512 * 1024 + RUNTIME_BYTES,
        "usable_memory_fraction": 1.0,
    }
    self_check(kv_cache_fits(COURSE_MODEL, exact, 1, 512) is True, "exactly full still fits")
    self_check(kv_cache_fits(COURSE_MODEL, exact, 1, 512, 2, 1) is True, "an 8-bit cache fits too")
    self_check(max_batch_that_fits(COURSE_MODEL, exact, 512) == 1, "exactly one sequence fits")
    self_check(max_batch_that_fits(LLAMA3_8B, t4, 512) == 0, "fp16 Llama-3-8B: no batch fits")
    h100 = {**t4, "memory_bytes": 81559 * 2**20}
    wall = max_batch_that_fits(LLAMA3_8B, h100, 512)
    self_check(wall == 859, f"Llama-3-8B on an H100, 512 tokens: 859 sequences, got {wall}")
    free = max_batch_that_fits(LLAMA3_8B, h100, 512, runtime_bytes=0)
    self_check(free == 907, f"... 907 if the runtime cost nothing (48 x 64 MiB), got {free}")
    q = quantized_weight_bytes(LLAMA3_8B, 4)
    naive = max_batch_that_fits(LLAMA3_8B, t4, 512, 0.5, 1)
    real = max_batch_that_fits(LLAMA3_8B, t4, 512, q["resident"] / num_params(LLAMA3_8B), 1)
    self_check(
        (naive, real) == (216, 165), f"4-bit on a T4: 216 naively, 165 really: {naive, real}"
    )
    for call, error in (
        (
            lambda: decode_tokens_per_s_bound(COURSE_MODEL, {"peak_bandwidth": 0.0}, 1, 0),
            ValueError,
        ),
        (lambda: decode_tokens_per_s_bound(COURSE_MODEL, t4, 0, 0), ValueError),
        (lambda: decode_tokens_per_s_bound(COURSE_MODEL, t4, True, 0), TypeError),
        (
            lambda: kv_cache_fits(COURSE_MODEL, {"name": "T4", "memory_bytes": 1e9}, 1, 0),
            ValueError,
        ),
        (
            lambda: kv_cache_fits(COURSE_MODEL, {**t4, "usable_memory_fraction": 1.5}, 1, 0),
            ValueError,
        ),
        (lambda: kv_cache_fits(COURSE_MODEL, t4, 1, -1), ValueError),
        (lambda: kv_cache_fits(COURSE_MODEL, "T4", 1, 0), TypeError),
        (lambda: max_batch_that_fits(COURSE_MODEL, t4, 0), ValueError),
        (lambda: max_batch_that_fits(COURSE_MODEL, t4, 512, dtype_bytes="2"), TypeError),
        (lambda: max_batch_that_fits(COURSE_MODEL, t4, 512, 2, kv_dtype_bytes=0), ValueError),
        (lambda: max_batch_that_fits(COURSE_MODEL, t4, 512, runtime_bytes=-1), ValueError),
        (lambda: kv_cache_fits(COURSE_MODEL, t4, 1, 0, runtime_bytes=True), TypeError),
    ):
        expect_error(error, call, "a bad gpu dict, batch, context_len or size")


_check_serving()
del _check_serving
print("decode_tokens_per_s_bound, kv_cache_fits, max_batch_that_fits: self-checks passed")


# %% [markdown]
# ## 9. Write `metrics.json` without ever losing a key
#
# Each milestone adds one key to the same `metrics.json` at the repository root, and the autograder
# reads them all. A careless writer (open with `"w"`, dump only your key) deletes the other
# milestones' results. Yours must:
#
# * **take the path as a `str` or a `pathlib.Path`** (the grader passes both; anything else is a
#   `TypeError`);
# * **check the key**: a key that is not a `str` is a `TypeError`, an empty one a `ValueError`;
# * **merge**: read the existing JSON object, set `data[key] = value`, write everything back;
# * **refuse to guess**: if the file exists but is not a valid JSON object, raise `ValueError`
#   naming the file and saying how to fix it, instead of starting from `{}` and dropping keys;
# * **reject bad values**: anything JSON cannot represent (a set, an object) is a `TypeError`;
#   NaN or infinity (which Python's `json` would happily write, but strict JSON readers refuse)
#   is a `ValueError`;
# * **be atomic**: write to a temporary file in the same folder, then `os.replace` it over the
#   target, so a crash midway leaves either the old file or the new one, never half of one;
# * **keep the file's permissions**: `tempfile.mkstemp` creates its file readable by you alone
#   (mode `0o600`), and `os.replace` keeps that mode, so a `metrics.json` that others could read
#   would silently become private. Before the replace, give the temporary file the old file's
#   mode (`stat.S_IMODE(os.stat(path).st_mode)`), or for a new file the mode an ordinary
#   `open(path, "w")` gives (`0o666` less the umask: `umask = os.umask(0); os.umask(umask)`
#   reads it);
# * write with sorted keys and an indent of 2, so diffs between commits stay readable.

# %% deletable=false nbgrader={"grade": false, "grade_id": "save_metric", "locked": false, "schema_version": 3, "solution": true, "task": false, "checksum": "1aea33a9e03a9ba40280be019735bae3", "cell_type": "code"}
def save_metric(path, key, value):
    """Set metrics[key] = value in the JSON file at `path`, keeping every other key.

    `path` is a str or a pathlib.Path (TypeError otherwise). `key` is a non-empty str (TypeError
    for a non-str, ValueError for ""); `value` must be plain JSON data (TypeError otherwise) with
    no NaN or infinity (ValueError). A missing or empty file counts as {}; a file that is not a
    JSON object raises ValueError naming it. The file is replaced atomically (temp file +
    os.replace), keeps its permissions (a new one gets open()'s: 0o666 less the umask) and is
    written with sorted keys and indent 2. Returns None.
    """
    # YOUR CODE HERE
    raise NotImplementedError("save_metric: implement this (see the docstring)")


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "check_save_metric", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false, "checksum": "6a2e74edf062bce394291edaf312ea46", "cell_type": "code"}
def _check_save_metric():
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "metrics.json"
        save_metric(path, "m1", {"loss": 2.5})
        save_metric(path, "m9_roofline", {"crossover_batch": None})
        self_check(
            json.loads(path.read_text())
            == {"m1": {"loss": 2.5}, "m9_roofline": {"crossover_batch": None}},
            "the second save_metric must keep the first key",
        )
        save_metric(str(path), "m1", 3)  # a str path works too; overwriting one key keeps the other
        self_check(
            json.loads(path.read_text()) == {"m1": 3, "m9_roofline": {"crossover_batch": None}},
            "save_metric(str path, 'm1', 3) must overwrite m1 and keep m9_roofline",
        )
        if os.name == "posix":  # the file keeps its mode; mkstemp's 0o600 must not replace it
            os.chmod(path, 0o640)
            save_metric(path, "m1", 4)
            mode = stat.S_IMODE(os.stat(path).st_mode)
            self_check(mode == 0o640, f"save_metric changed the file's mode to {oct(mode)}")
            umask = os.umask(0)
            os.umask(umask)
            fresh = Path(tmp) / "fresh.json"
            save_metric(fresh, "m1", 1)
            mode = stat.S_IMODE(os.stat(fresh).st_mode)
            self_check(
                mode == 0o666 & ~umask,
                f"a new file gets open()'s mode, {oct(0o666 & ~umask)}, not {oct(mode)}",
            )
            fresh.unlink()
        expect_error(ValueError, lambda: save_metric(path, "", 1), "save_metric(path, '', 1)")
        for bad, error in (
            (float("nan"), ValueError),
            ({"x": float("inf")}, ValueError),
            (object(), TypeError),
            ({1, 2}, TypeError),
        ):
            expect_error(error, lambda bad=bad: save_metric(path, "bad", bad), f"{bad!r}")
        path.write_text("{not json")
        try:
            save_metric(path, "m9_roofline", 1)
        except ValueError as exc:
            self_check("metrics.json" in str(exc), f"the error must name the file: {exc}")
        else:
            raise AssertionError("a corrupt metrics.json must raise ValueError, not be overwritten")
        self_check(path.read_text() == "{not json", "a corrupt file must be left as it was")
        self_check(
            sorted(p.name for p in Path(tmp).iterdir()) == ["metrics.json"], "temp file left behind"
        )


_check_save_metric()
del _check_save_metric
print("save_metric: self-checks passed")


# %% [markdown]
# ## 10. One decode step, kernel by kernel
#
# Sections 4 and 5 treated a decode step as one blob of FLOPs and bytes. A GPU does not run
# blobs; it runs kernels, one after another, and each kernel sits on the roofline by its own
# intensity. A decode step has two kinds that behave in opposite ways:
#
# * **The weight matmuls** (wq, wk, wv, wo, w1, w2, w3, the output head): they read the $P$
#   weights once for the whole batch and do $2 P$ FLOPs per sequence,
#   $$I_\text{weights} = \frac{2 \cdot P \cdot \text{batch}}{P \cdot \text{dtype\_bytes}}
#   = \frac{2 \cdot \text{batch}}{\text{dtype\_bytes}}.$$
#   Their intensity grows with the batch and turns compute-bound at
#   $\text{batch} \ge \text{ridge} \cdot \text{dtype\_bytes} / 2$: 204 sequences in fp16 on the
#   T4 (ridge 203.1), 296 on the H100 (ridge 295.2), whatever the model. Against the T4's
#   practical ridge of about 100 (section 5), a real T4 gets there near batch 100.
# * **Attention over the cache**: each sequence reads its own cache and does
#   $4 \cdot n_\text{layers} \cdot \text{dim} \cdot \text{context\_len}$ FLOPs with it (section 4), so
#   $$I_\text{attention} = \frac{4 \cdot n_\text{layers} \cdot \text{dim} \cdot \text{context\_len}}
#   {\text{context\_len} \cdot 2 \cdot n_\text{layers} \cdot n_\text{kv\_heads} \cdot \text{head\_dim}
#   \cdot \text{kv\_dtype\_bytes}} = \frac{2}{\text{kv\_dtype\_bytes}} \cdot \frac{n_\text{heads}}
#   {n_\text{kv\_heads}}.$$
#   The batch and the context cancel: batching cannot help attention at all. Its intensity is
#   the grouped-query ratio (2 for the course model, 4 for Llama-3-8B, in fp16), far left of any
#   ridge, for ever.
#
# That is the whole story behind `crossover_batch` returning `None`: the blob's intensity is an
# average of a kernel that batching lifts and a kernel it cannot touch, and at long contexts the
# second one dominates the bytes.
#
# Each kernel takes at least its own roofline time, $\max(\text{bytes} / \text{peak\_bandwidth},
# \text{FLOPs} / \text{peak\_flops})$, and the step takes their **sum**, because they run one
# after the other. That sum is never less than the one-blob bound of section 8: when the weights
# are compute-bound and attention is memory-bound, each pays for its own roof and neither hides
# the other.
#
# **Exercise.** Write `decode_step_breakdown(cfg, batch, context_len, gpu, dtype_bytes=2,
# kv_dtype_bytes=None)`. It returns a dict with three keys: `"weights"` and `"attention"`, each a dict
# with the keys `flops`, `bytes`, `intensity` (FLOP/byte), `time_s` (seconds: the kernel's
# roofline time) and `bound` (the string `"compute"` when its intensity is at or above the ridge
# `peak_flops / peak_bandwidth`, else `"memory"`), and `"time_s"`, the sum of the two kernels'
# times. Decide `bound` as S5.1's `is_memory_bound` does: compare `flops / bytes` with
# `peak_flops / peak_bandwidth`, both computed as floats, so that a kernel exactly at the ridge
# is compute-bound; the rearranged `intensity * peak_bandwidth >= peak_flops` rounds differently
# and gets the ridge wrong (the grader tries a kernel that sits on it). Every number is a
# Python `float`. With $P$ = `matmul_params(cfg)`, $E$ = `kv_bytes_per_token(cfg, 1)` (the
# cached numbers per token), $w$ = `dtype_bytes` and $k$ =
# `kv_dtype_bytes` (`None`: $w$):
#
# | kernel | FLOPs | bytes |
# |---|---|---|
# | weights | $2 \cdot P \cdot \text{batch}$ | $P \cdot w$ |
# | attention | $4 \cdot n_\text{layers} \cdot \text{dim} \cdot \text{context\_len} \cdot \text{batch}$ | $\text{batch} \cdot \text{context\_len} \cdot E \cdot k$ |
#
# `batch` and `context_len` (the tokens in each sequence's cache) are ints >= 1; the sizes follow
# the notebook's rule; `gpu` needs `peak_flops` and `peak_bandwidth`.

# %% deletable=false nbgrader={"grade": false, "grade_id": "roofline_kernel", "locked": false, "schema_version": 3, "solution": true, "task": false, "checksum": "5c0600cc1a3f213288fcee1617e0eb16", "cell_type": "code"}
def roofline_kernel(flops, nbytes, gpu):
    """One kernel on the roofline: its FLOPs, bytes, intensity, time (s) and binding roof.

    A helper for decode_step_breakdown, prefill_time and the functions after them (not graded
    on its own): `flops` and `nbytes` are positive numbers, `gpu` a checked gpu dict. bound is
    "compute" when intensity = flops / nbytes >= peak_flops / peak_bandwidth, the two quotients
    compared as computed (S5.1's is_memory_bound rule: at the ridge itself, "compute"), not the
    rearranged product intensity * peak_bandwidth >= peak_flops, which rounds differently.
    """
    # YOUR CODE HERE
    raise NotImplementedError("roofline_kernel: implement this (see the docstring)")


# %% deletable=false nbgrader={"grade": false, "grade_id": "decode_step_breakdown", "locked": false, "schema_version": 3, "solution": true, "task": false, "checksum": "de40a61f84ab1d140e1559911232363f", "cell_type": "code"}
def decode_step_breakdown(cfg, batch, context_len, gpu, dtype_bytes=2, kv_dtype_bytes=None):
    """One decode step split into its weight matmuls and its attention over the KV cache.

    Returns {"weights": kernel, "attention": kernel, "time_s": the two kernels' times summed},
    each kernel {"flops", "bytes", "intensity", "time_s", "bound"} (floats; bound "compute" or
    "memory"). kv_dtype_bytes=None means dtype_bytes. Raises TypeError or ValueError for invalid
    inputs.
    """
    # YOUR CODE HERE
    raise NotImplementedError("decode_step_breakdown: implement this (see the docstring)")


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "check_decode_step_breakdown", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false, "checksum": "09f4fec19e03db6cbd2aa363b74ae5a2", "cell_type": "code"}
def _check_decode_step_breakdown():
    t4 = {"name": "T4", "peak_flops": 65e12, "peak_bandwidth": 320e9}
    step = decode_step_breakdown(COURSE_MODEL, 1, CONTEXT_LEN, t4)
    self_check(set(step) == {"weights", "attention", "time_s"}, f"three keys, got {sorted(step)}")
    self_check(
        step["weights"]["intensity"] == 1.0 and step["weights"]["bound"] == "memory",
        f"fp16 weights at batch 1: 1 FLOP/byte, memory-bound; got {step['weights']}",
    )
    self_check(
        step["attention"]["intensity"] == 2.0,
        f"attention: n_heads / n_kv_heads = 2 FLOP/byte in fp16; got {step['attention']}",
    )
    self_check(
        decode_step_breakdown(COURSE_MODEL, 256, CONTEXT_LEN, t4)["attention"]["intensity"] == 2.0,
        "batching does not change attention's intensity",
    )
    big = decode_step_breakdown(COURSE_MODEL, 204, CONTEXT_LEN, t4)
    self_check(
        big["weights"]["bound"] == "compute" and big["attention"]["bound"] == "memory",
        "batch 204 > ridge 203.1: the weights turn compute-bound, attention never does",
    )
    self_check(
        decode_step_breakdown(COURSE_MODEL, 203, CONTEXT_LEN, t4)["weights"]["bound"] == "memory",
        "batch 203 is still just under the ridge",
    )
    self_check(
        abs(step["time_s"] - (step["weights"]["time_s"] + step["attention"]["time_s"])) < 1e-15,
        "the step's time is the sum of its kernels' times",
    )
    mixed = decode_step_breakdown(LLAMA3_8B, 1, CONTEXT_LEN, t4, dtype_bytes=0.5, kv_dtype_bytes=1)
    self_check(
        mixed["weights"]["bytes"] == 0.5 * matmul_params(LLAMA3_8B)
        and mixed["attention"]["bytes"] == CONTEXT_LEN * kv_bytes_per_token(LLAMA3_8B, 1),
        "4-bit weights and an 8-bit cache: each term uses its own precision",
    )
    same = decode_step_breakdown(LLAMA3_8B, 1, CONTEXT_LEN, t4, dtype_bytes=1)
    self_check(
        same["attention"]["bytes"] == CONTEXT_LEN * kv_bytes_per_token(LLAMA3_8B, 1),
        "kv_dtype_bytes=None: the cache has the weights' size",
    )
    for call, error in (
        (lambda: decode_step_breakdown(COURSE_MODEL, 1, 0, t4), ValueError),
        (lambda: decode_step_breakdown(COURSE_MODEL, 1, 16, t4, kv_dtype_bytes=0), ValueError),
        (lambda: decode_step_breakdown(COURSE_MODEL, 1, 16, t4, dtype_bytes=True), TypeError),
        (lambda: decode_step_breakdown(COURSE_MODEL, 2.0, 16, t4), TypeError),
    ):
        expect_error(error, call, "decode_step_breakdown with a bad argument")


_check_decode_step_breakdown()
del _check_decode_step_breakdown
print("decode_step_breakdown: self-checks passed")


# %% [markdown]
# ## 11. Prefill against decode: time to first token, time per output token
#
# Before the first new token, the model reads the whole prompt: **prefill**. Every prompt token
# goes through the weights in the same pass, so prefill is a fat matmul, not a skinny one. For a
# batch of prompts of $n$ = `prompt_len` tokens:
#
# * the weights are read once, $P \cdot w$ bytes. Every prompt token goes through every layer,
#   but **the output head scores the last position only**: sampling the first new token needs
#   the logits of the last position alone, so serving engines compute nothing else there. With
#   $H = \text{vocab\_size} \cdot \text{dim}$ the head's weights (the tied table, or the untied
#   head: either way part of $P$), the weights do
#   $$2 \cdot \text{batch} \cdot \left(n \cdot (P - H) + H\right)$$
#   FLOPs, compute-bound on a T4 in fp16 from a prompt of a couple of hundred tokens on.
#   Counting the head for every prompt token would overstate Llama-3-8B's prefill by 7.5% and
#   the course model's, whose tied head is 40% of its weights, by two thirds;
# * attention is causal: token $i$ (counting from 1) attends to the $i$ tokens up to and
#   including itself, $4 \cdot n_\text{layers} \cdot \text{dim} \cdot i$ FLOPs, so a prompt costs
#   $4 \cdot n_\text{layers} \cdot \text{dim} \cdot \sum_{i=1}^{n} i = 2 \cdot n_\text{layers}
#   \cdot \text{dim} \cdot n (n + 1)$ FLOPs per sequence. Its bytes are the KV cache it **writes**
#   for the decode steps that follow: $\text{batch} \cdot n \cdot E \cdot k$ (with $E$ and $k$ as
#   in section 10). (A fused attention kernel keeps the prompt's own K and V on chip; we count
#   only the cache written to DRAM, and no activations.)
#
# Prefill takes the two kernels' roofline times summed, like a decode step. Two numbers then
# describe what a user feels:
#
# * **TTFT**, the time to first token, is the prefill time **when the request finds the GPU
#   free**. On a busy server it also waits in the queue for the requests ahead of it, and its
#   prefill shares steps with other sequences' decodes; what this notebook computes is the floor
#   a scheduler starts from, not the TTFT a loaded server shows;
# * **TPOT**, the time per output token, is the time of one decode step with the prompt in the
#   cache (`decode_step_breakdown(cfg, batch, prompt_len, ...)["time_s"]`).
#
# For Llama-3-8B on an H100 with a 512-token prompt, prefill does about 472 times the FLOPs of a
# decode step on the same bytes of weights, yet takes well under twice as long (about 7.3 ms
# against 4.5 ms), because it is compute-bound while decode waits on memory. That asymmetry is
# why serving systems schedule prefills and decodes differently (section 14's chunked prefill,
# and separate prefill and decode GPUs).
#
# **Exercise.** Write `prefill_time(cfg, batch, prompt_len, gpu, dtype_bytes=2,
# kv_dtype_bytes=None)`, the prefill's time in seconds (a Python `float`), and
# `ttft_and_tpot(cfg, batch, prompt_len, gpu, dtype_bytes=2, kv_dtype_bytes=None)`, which returns
# the tuple `(ttft_s, tpot_s)` of two Python floats. `batch` and `prompt_len` are ints >= 1; the
# rest is checked as in `decode_step_breakdown`.

# %% deletable=false nbgrader={"grade": false, "grade_id": "prefill_time", "locked": false, "schema_version": 3, "solution": true, "task": false, "checksum": "1f1c263f0e0361748a0d3a95afb5e3ee", "cell_type": "code"}
def prefill_time(cfg, batch, prompt_len, gpu, dtype_bytes=2, kv_dtype_bytes=None):
    """Seconds (a float) to prefill `batch` prompts of `prompt_len` tokens: the weight matmuls'
    (the output head for the last position only) and the causal attention's roofline times
    summed (attention's bytes: the KV cache written). kv_dtype_bytes=None means dtype_bytes.

    Raises TypeError or ValueError for invalid inputs.
    """
    # YOUR CODE HERE
    raise NotImplementedError("prefill_time: implement this (see the docstring)")


# %% deletable=false nbgrader={"grade": false, "grade_id": "ttft_and_tpot", "locked": false, "schema_version": 3, "solution": true, "task": false, "checksum": "961378fcd868361f0b077b3340f8fdca", "cell_type": "code"}
def ttft_and_tpot(cfg, batch, prompt_len, gpu, dtype_bytes=2, kv_dtype_bytes=None):
    """(time to first token, time per output token) in seconds, a tuple of two floats: the
    prefill of the prompts, then one decode step with the prompt_len tokens in the cache."""
    # YOUR CODE HERE
    raise NotImplementedError("ttft_and_tpot: implement this (see the docstring)")


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "check_prefill", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false, "checksum": "040901a188893f2f03bf09e1c7ca49e1", "cell_type": "code"}
def _check_prefill():
    t4 = {"name": "T4", "peak_flops": 65e12, "peak_bandwidth": 320e9}
    # A one-token prompt is memory-bound: the weights' bytes plus the one token's cache entry.
    one = prefill_time(COURSE_MODEL, 1, 1, t4)
    want = (2 * matmul_params(COURSE_MODEL) + kv_bytes_per_token(COURSE_MODEL)) / 320e9
    self_check(abs(one - want) < 1e-9 * want, f"a 1-token prefill takes {want:.4g} s, got {one!r}")
    # A long prompt is compute-bound; the head scores its last position only.
    h100 = {"name": "H100", "peak_flops": 989e12, "peak_bandwidth": 3350e9}
    p, head, n = matmul_params(LLAMA3_8B), 128256 * 4096, 4096
    flops = 2 * (n * (p - head) + head), 2 * 32 * 4096 * n * (n + 1)
    want = sum(f / 989e12 for f in flops)
    got = prefill_time(LLAMA3_8B, 1, n, h100)
    self_check(abs(got - want) < 1e-9 * want, f"4,096 tokens on an H100: {want:.6g} s, got {got!r}")
    ttft, tpot = ttft_and_tpot(LLAMA3_8B, 1, CONTEXT_LEN, t4)
    self_check(type(ttft) is float and type(tpot) is float, "ttft_and_tpot returns two floats")
    self_check(
        tpot == decode_step_breakdown(LLAMA3_8B, 1, CONTEXT_LEN, t4)["time_s"],
        "TPOT is one decode step with the prompt in the cache",
    )
    self_check(ttft > tpot, "prefilling 512 tokens takes longer than decoding one")
    self_check(
        prefill_time(LLAMA3_8B, 1, CONTEXT_LEN, t4)
        < CONTEXT_LEN * decode_step_breakdown(LLAMA3_8B, 1, CONTEXT_LEN, t4)["time_s"],
        "one prefill of 512 tokens is far faster than 512 decode steps",
    )
    for call, error in (
        (lambda: prefill_time(COURSE_MODEL, 1, 0, t4), ValueError),
        (lambda: prefill_time(COURSE_MODEL, 1, 8, {"peak_flops": 1e12}), ValueError),
        (lambda: ttft_and_tpot(COURSE_MODEL, 1, "512", t4), TypeError),
    ):
        expect_error(error, call, "prefill_time / ttft_and_tpot with a bad argument")


_check_prefill()
del _check_prefill
print("prefill_time, ttft_and_tpot: self-checks passed")


# %% [markdown]
# ## 12. How good is a measured decode? MBU and MFU
#
# The roofline says how fast a step *could* go. A benchmark gives you how fast it *did* go: its
# time per output token, TPOT. Two ratios compare the two, each against one roof:
#
# $$\text{MBU} = \frac{\text{bytes the step must move}}{\text{TPOT} \cdot
# \text{peak\_bandwidth}}, \qquad \text{MFU} = \frac{\text{FLOPs the step must do}}{\text{TPOT}
# \cdot \text{peak\_flops}},$$
#
# model bandwidth utilisation and model FLOP utilisation. "Must" means counted from the model,
# not measured from the kernels: the bytes and FLOPs of section 10's two kernels,
#
# $$\text{bytes} = P \cdot w + \text{batch} \cdot \text{context\_len} \cdot E \cdot k, \qquad
# \text{FLOPs} = 2 \cdot P \cdot \text{batch} + 4 \cdot n_\text{layers} \cdot \text{dim} \cdot
# \text{context\_len} \cdot \text{batch}.$$
#
# A memory-bound decode is judged by its **MBU**: 100% is the roofline, and a well-tuned engine
# gets a small batch's decode to well over half of it. Its MFU is small by nature, and how small
# depends on the batch. Take Llama-3-8B on an H100 at 2,048 tokens of context, running exactly at
# the roofline (MBU 100%): its MFU is 0.36% at batch 1, 4.5% at batch 16 and 10.8% at batch 64.
# The often-quoted "decode tops out at 5 to 10% MFU" describes moderate batches like these; a
# single sequence sits far below it, whatever the kernel. (Training's MFU of 40 to 60% is the
# same ratio for a compute-bound workload.)
#
# **Exercise.** Write `decode_utilization(cfg, batch, context_len, gpu, tpot_s, dtype_bytes=2,
# kv_dtype_bytes=None)`: the dict `{"mbu": ..., "mfu": ...}` of two Python `float`s (fractions,
# not percentages) for a decode step of `batch` sequences with `context_len` tokens each in the
# cache that took `tpot_s` seconds. `tpot_s` is a positive, finite number of seconds (`TypeError`
# when it is not a number, `ValueError` when it is not positive or not finite); `gpu` needs
# `peak_flops` and `peak_bandwidth`; the rest is checked as in `decode_step_breakdown`. A TPOT
# faster than the roofline gives a ratio above 1: return it as computed (the bytes came from a
# cache, or the measurement is wrong; either way the ratio says so).

# %% deletable=false nbgrader={"grade": false, "grade_id": "decode_utilization", "locked": false, "schema_version": 3, "solution": true, "task": false, "checksum": "a48b158c24d0bda01351832fae975696", "cell_type": "code"}
def decode_utilization(cfg, batch, context_len, gpu, tpot_s, dtype_bytes=2, kv_dtype_bytes=None):
    """{"mbu": float, "mfu": float} of a decode step that took `tpot_s` seconds: the bytes and
    FLOPs of decode_step_breakdown's two kernels, over tpot_s * peak_bandwidth and tpot_s *
    peak_flops. Raises TypeError or ValueError for invalid inputs."""
    # YOUR CODE HERE
    raise NotImplementedError("decode_utilization: implement this (see the docstring)")


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "check_decode_utilization", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false, "checksum": "aa68e3b5e8e9d3d71402c400bc61208b", "cell_type": "code"}
def _check_decode_utilization():
    h100 = {"name": "H100", "peak_flops": 989e12, "peak_bandwidth": 3350e9}
    for batch, mfu in ((1, 0.0036), (16, 0.045), (64, 0.108)):
        roof = decode_step_breakdown(LLAMA3_8B, batch, 2048, h100)["time_s"]
        got = decode_utilization(LLAMA3_8B, batch, 2048, h100, roof)
        self_check(set(got) == {"mbu", "mfu"}, f"two keys, mbu and mfu: {sorted(got)}")
        self_check(
            abs(got["mbu"] - 1) < 1e-9 and abs(got["mfu"] - mfu) < 0.0005,
            f"at the roofline, batch {batch}: MBU 1.0, MFU about {mfu}; got {got}",
        )
    slow = decode_utilization(COURSE_MODEL, 1, 512, h100, 1e-3)
    want = (2 * matmul_params(COURSE_MODEL) + 512 * 1024) / (1e-3 * 3350e9)
    self_check(type(slow["mbu"]) is float and abs(slow["mbu"] - want) < 1e-12, f"MBU {want:.4g}")
    eight = decode_utilization(LLAMA3_8B, 8, 512, h100, 0.01, 2, 1)
    want = (2 * matmul_params(LLAMA3_8B) + 8 * 512 * kv_bytes_per_token(LLAMA3_8B, 1)) / 3.35e10
    self_check(abs(eight["mbu"] - want) < 1e-9 * want, "an 8-bit cache: the KV bytes use 1 byte")
    for tpot, error in ((0, ValueError), (-1e-3, ValueError), ("1ms", TypeError)):
        expect_error(
            error,
            lambda tpot=tpot: decode_utilization(COURSE_MODEL, 1, 512, h100, tpot),
            f"decode_utilization(..., tpot_s={tpot!r})",
        )


_check_decode_utilization()
del _check_decode_utilization
print("decode_utilization: self-checks passed")


# %% [markdown]
# ## 13. Continuous batching: sequences of every length, one step
#
# So far every sequence of a batch had the same context. A server's batch never does: requests
# arrive at different times with prompts of different lengths, and each ends when it emits its
# end token. *Static* batching waits for a whole batch and pads every sequence to the longest,
# so each step reads as much cache as if all of them were that long. *Continuous* (in-flight)
# batching (Orca, Yu et al. 2022; vLLM, TGI, TensorRT-LLM) schedules at every step: a finished
# sequence leaves, a waiting one joins at once, and with a paged KV cache each sequence reads
# its own tokens only. A step of a batch with contexts $c_1, \dots, c_B$ then has
#
# | kernel | FLOPs | bytes |
# |---|---|---|
# | weights | $2 \cdot P \cdot B$ | $P \cdot w$ |
# | attention | $4 \cdot n_\text{layers} \cdot \text{dim} \cdot \sum_i c_i$ | $\sum_i c_i \cdot E \cdot k$ |
#
# Only the *sum* of the contexts matters. Four sequences of 100, 500, 2,000 and 8,000 tokens
# decode on an H100 (Llama-3-8B, fp16) in 4.9 ms a step; padded to 8,000 each, in 5.7 ms.
#
# **Exercise.** Write `ragged_decode_step(cfg, context_lens, gpu, dtype_bytes=2,
# kv_dtype_bytes=None)`: the step's time in seconds, a Python `float`, the two kernels' roofline
# times summed as in `decode_step_breakdown` (which it equals when every context is the same).
# `context_lens` is a non-empty list or tuple of ints >= 1, one per sequence (`TypeError` for
# anything else or for an entry that is not an int, `ValueError` when it is empty or an entry is
# below 1); the rest is checked as in `decode_step_breakdown`.

# %% deletable=false nbgrader={"grade": false, "grade_id": "ragged_decode_step", "locked": false, "schema_version": 3, "solution": true, "task": false, "checksum": "330400b6d5af83f8211383f50515cede", "cell_type": "code"}
def ragged_decode_step(cfg, context_lens, gpu, dtype_bytes=2, kv_dtype_bytes=None):
    """Seconds (a float) of one decode step of len(context_lens) sequences, sequence i with
    context_lens[i] tokens in its cache: the weights' and attention's roofline times summed, with
    attention over the sum of the contexts. Raises TypeError or ValueError for invalid inputs."""
    # YOUR CODE HERE
    raise NotImplementedError("ragged_decode_step: implement this (see the docstring)")


# %% [markdown]
# **Choosing the batch under a latency target.** A serving engineer is asked for throughput at a
# latency: "as many tokens per second as you can, with every user seeing at least 50 tokens a
# second", a TPOT of at most 20 ms. Each step's time grows with the batch (attention's bytes in
# proportion, the weights' FLOPs once past the ridge), so the answer is the largest batch whose
# step still meets the target, and which fits in memory. For Llama-3-8B on an H100 at 2,048
# tokens: 68 sequences at 10 ms, 193 at 20 ms, and from 21.6 ms on the memory wall's 214
# (the step time at the wall itself), about 9,900 tokens/s.
#
# **Exercise.** Write `max_batch_under_tpot(cfg, gpu, context_len, tpot_s, dtype_bytes=2,
# kv_dtype_bytes=None, runtime_bytes=RUNTIME_BYTES)`: the largest batch `b` (a Python `int`) with
# `decode_step_breakdown(cfg, b, context_len, gpu, ...)["time_s"] <= tpot_s` and `b <=
# max_batch_that_fits(cfg, gpu, context_len, ..., runtime_bytes)`, or 0 when batch 1 already misses
# either. The answer agrees with `decode_step_breakdown`: `b` meets the target and, unless the
# memory wall stopped it, `b + 1` does not. `gpu` needs `peak_flops`, `peak_bandwidth`,
# `memory_bytes` and `usable_memory_fraction`; `context_len` is an int >= 1, `tpot_s` a positive,
# finite number of seconds and `runtime_bytes` as in `kv_cache_fits`. The wall can be millions of
# sequences for a small model: search by halving the interval, or solve the inequality, rather than
# trying every batch.

# %% deletable=false nbgrader={"grade": false, "grade_id": "max_batch_under_tpot", "locked": false, "schema_version": 3, "solution": true, "task": false, "checksum": "8eab3e742ab606d1df45c32e92bc5127", "cell_type": "code"}
def max_batch_under_tpot(
    cfg,
    gpu,
    context_len,
    tpot_s,
    dtype_bytes=2,
    kv_dtype_bytes=None,
    runtime_bytes=RUNTIME_BYTES,
):
    """Largest batch (an int >= 0) whose decode step at `context_len` takes at most `tpot_s`
    seconds (decode_step_breakdown's time_s) and that fits (max_batch_that_fits, with the same
    runtime_bytes); 0 when batch 1 misses either. Raises TypeError or ValueError for invalid
    inputs."""
    # YOUR CODE HERE
    raise NotImplementedError("max_batch_under_tpot: implement this (see the docstring)")


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "check_continuous_batching", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false, "checksum": "e80b58573ff01988edb2a373b8b73568", "cell_type": "code"}
def _check_continuous_batching():
    h100 = {
        "name": "H100",
        "peak_flops": 989e12,
        "peak_bandwidth": 3350e9,
        "memory_bytes": 81559 * 2**20,
        "usable_memory_fraction": 0.9,
        "sm_count": 132,
    }
    same = ragged_decode_step(LLAMA3_8B, [512] * 8, h100)
    want = decode_step_breakdown(LLAMA3_8B, 8, 512, h100)["time_s"]
    self_check(type(same) is float and abs(same - want) < 1e-12 * want, "equal contexts: as before")
    mixed = ragged_decode_step(LLAMA3_8B, (100, 500, 2000, 8000), h100)
    padded = ragged_decode_step(LLAMA3_8B, [8000] * 4, h100)
    self_check(abs(mixed - 4.895e-3) < 1e-6 and padded > mixed, f"4.9 ms, not {mixed!r}")
    self_check(
        abs(ragged_decode_step(LLAMA3_8B, [2650] * 4, h100) - mixed) < 1e-12 * mixed,
        "only the sum of the contexts matters",
    )
    for target, want in ((0.010, 68), (0.020, 193), (0.050, 214), (1e-4, 0)):
        got = max_batch_under_tpot(LLAMA3_8B, h100, 2048, target)
        self_check(got == want and type(got) is int, f"TPOT {target} s: batch {want}, got {got!r}")
    free = max_batch_under_tpot(LLAMA3_8B, h100, 2048, 0.050, runtime_bytes=0)
    self_check(free == 226, f"with no runtime the wall would be 226, got {free!r}")
    small = max_batch_under_tpot(COURSE_MODEL, h100, 512, 1.0)
    self_check(
        small == max_batch_that_fits(COURSE_MODEL, h100, 512),
        f"a loose target: the memory wall, {max_batch_that_fits(COURSE_MODEL, h100, 512):,}",
    )
    for call, error in (
        (lambda: ragged_decode_step(COURSE_MODEL, [], h100), ValueError),
        (lambda: ragged_decode_step(COURSE_MODEL, [16, 0], h100), ValueError),
        (lambda: ragged_decode_step(COURSE_MODEL, 16, h100), TypeError),
        (lambda: ragged_decode_step(COURSE_MODEL, [16, 2.0], h100), TypeError),
        (lambda: max_batch_under_tpot(COURSE_MODEL, h100, 512, 0.0), ValueError),
        (lambda: max_batch_under_tpot(COURSE_MODEL, h100, 0, 0.01), ValueError),
        (lambda: max_batch_under_tpot(COURSE_MODEL, {"peak_flops": 1e12}, 512, 0.01), ValueError),
    ):
        expect_error(error, call, "ragged_decode_step / max_batch_under_tpot with a bad argument")


_check_continuous_batching()
del _check_continuous_batching
print("ragged_decode_step, max_batch_under_tpot: self-checks passed")


# %% [markdown]
# ## 14. Chunked prefill: prompt tokens that ride along for free
#
# A long prompt's prefill is compute-bound and a decode step memory-bound (section 11). Run them
# one after the other and a 4,096-token prefill stalls every decoding sequence for its whole
# duration, while the decode steps around it leave the tensor cores idle. **Chunked prefill**
# (Sarathi-Serve, Agrawal et al. 2024; vLLM's `enable_chunked_prefill`, bounded by
# `max_num_batched_tokens`) cuts the prompt into chunks and adds one chunk to each decode step.
#
# The roofline says why that is nearly free. A step that carries `batch` decode tokens and a
# chunk of $c$ prompt tokens pushes $T = \text{batch} + c$ tokens through the same weights:
# $2 \cdot P \cdot T$ FLOPs on $P \cdot w$ bytes, an intensity of $2T / w$. While that is below
# the ridge, the weight GEMMs are memory-bound: they take the weight bytes over the bandwidth,
# whatever $T$ is. So a step's tokens are free up to
#
# $$T < \frac{\text{ridge} \cdot w}{2}:$$
#
# 203 tokens on a T4 and 295 on an H100 in 16-bit. The precision moves it: with W4A16 the
# weight bytes shrink but the fp16 roof stays, so an H100 has only 73 free tokens a step; with
# W8A8 (FP8) both change and it is 295 again ($591 \cdot 1 / 2$). This is the simplified
# roofline picture: the chunk's own attention and KV writes cost extra, and a real GEMM runs
# below its roof near the ridge. Engines often set `max_num_batched_tokens` past it, to a few
# thousand tokens, trading some TPOT for a shorter TTFT: past the ridge each extra token costs
# compute time, but the prompt finishes sooner.
#
# **Exercise.** Write `chunked_prefill_budget(gpu, batch, dtype_bytes=2)`: the number of prompt
# tokens (a Python `int`) a decode step of `batch` sequences can carry while its weight GEMMs stay
# memory-bound, the largest $c \ge 0$ with $2 (\text{batch} + c) / w$ strictly below the ridge
# `peak_flops / peak_bandwidth` (at the ridge a kernel is compute-bound), or 0 when there is no
# such $c$ (the decode batch alone is at or past the ridge). Compute it exactly
# (`fractions.Fraction`): where `ridge * w / 2` is a whole number of tokens, that many tokens
# are already at the ridge. `gpu` needs `peak_flops` and `peak_bandwidth`; `batch` is an
# int >= 1 and `dtype_bytes` follows the notebook's rule.

# %% deletable=false nbgrader={"grade": false, "grade_id": "chunked_prefill_budget", "locked": false, "schema_version": 3, "solution": true, "task": false, "checksum": "b34d78a5e92cac50128a3ba456ad7760", "cell_type": "code"}
def chunked_prefill_budget(gpu, batch, dtype_bytes=2):
    """Prompt tokens (an int >= 0) a decode step of `batch` sequences can add while the weight
    GEMMs stay memory-bound: the largest c with 2 * (batch + c) / dtype_bytes < peak_flops /
    peak_bandwidth, or 0 when none. Raises TypeError or ValueError for invalid inputs."""
    # YOUR CODE HERE
    raise NotImplementedError("chunked_prefill_budget: implement this (see the docstring)")


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "check_chunked_prefill_budget", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false, "checksum": "0f47e371e94c24dc501d6c100bb306dd", "cell_type": "code"}
def _check_chunked_prefill_budget():
    t4 = {"name": "T4", "peak_flops": 65e12, "peak_bandwidth": 320e9}
    h100 = {"name": "H100", "peak_flops": 989e12, "peak_bandwidth": 3350e9}
    h100_fp8 = {**h100, "peak_flops": 1979e12}
    for gpu, batch, w, want, why in (
        (t4, 1, 2, 202, "T4, fp16: 203 tokens a step, one of them the decode token"),
        (h100, 32, 2, 263, "H100, fp16, 32 decoding sequences: 295 - 32"),
        (h100, 1, 0.5, 72, "H100, W4A16: the fp16 roof with a quarter of the bytes: 73 - 1"),
        (h100_fp8, 1, 1, 294, "H100, W8A8 on FP8: 295 - 1"),
        (t4, 300, 2, 0, "300 decoding sequences are past the T4's ridge already"),
        (
            {"name": "x", "peak_flops": 400e12, "peak_bandwidth": 2e12},
            1,
            2,
            198,
            "ridge exactly 200: 200 tokens sit on it (compute-bound), 199 are below",
        ),
    ):
        got = chunked_prefill_budget(gpu, batch, w)
        self_check(got == want and type(got) is int, f"{why}: {want}, got {got!r}")
    for call, error in (
        (lambda: chunked_prefill_budget(t4, 0), ValueError),
        (lambda: chunked_prefill_budget(t4, 1, 0), ValueError),
        (lambda: chunked_prefill_budget(t4, 1.0), TypeError),
        (lambda: chunked_prefill_budget({"peak_flops": 65e12}, 1), ValueError),
    ):
        expect_error(error, call, "chunked_prefill_budget with a bad argument")


_check_chunked_prefill_budget()
del _check_chunked_prefill_budget
print("chunked_prefill_budget: self-checks passed")


# %% [markdown]
# ## 15. Decode attention: grouped queries, speculative tokens, and too few blocks
#
# Section 10 found decode attention's intensity to be
# $\frac{2}{k} \cdot \frac{n_\text{heads}}{n_\text{kv\_heads}}$ FLOP/byte, whatever the batch and
# the context: each sequence reads its own cache, so batching adds bytes as fast as FLOPs. The
# formula leaves two levers, and serving systems pull both.
#
# * **Share the keys and values among more queries.** Multi-head attention (as many K/V heads as
#   query heads) sits at 1 FLOP/byte in fp16; Llama-3-8B's grouped-query attention, four query
#   heads to a K/V head, at 4; multi-query attention (one K/V head for all) at `n_heads`.
# * **Verify several tokens per read: speculative decoding.** A small draft model proposes
#   $k$ tokens, and the target model checks them in one step of $s = k + 1$ queries per
#   sequence (the last accepted token and the $k$ guesses): they read the cache once, so
#   attention does $s$ times the FLOPs on the same bytes and its intensity is multiplied by $s$
#   (ignoring the $s$ tokens' attention to each other). The weight matmuls gain the same factor,
#   $2 \cdot \text{batch} \cdot s / w$. Speculation pays exactly where decode is memory-bound,
#   and stops paying once the step turns compute-bound.
#
#   **An $s$-fold intensity is not $s$ tokens a step.** The target keeps the guesses up to the
#   first one it rejects, plus one token of its own. If each guess is accepted with probability
#   $a$ (independently: the simple model of Leviathan et al. 2023), a step yields on average
#   $$\frac{1 - a^{k+1}}{1 - a}$$
#   tokens: with $a = 0.8$ and $k = 4$, 3.36 of the 5 the intensity suggests; with $a = 0.6$,
#   2.31. And the draft is not free: its $k$ steps read **its own** weights and cache, one after
#   another, before the target's step. With a draft step costing a fraction $c$ of a target
#   step, the speed-up is about $\frac{1 - a^{k+1}}{(1 - a)(1 + k c)}$: 2.4 for $a = 0.8$,
#   $k = 4$, $c = 0.1$, not 5. More guesses raise the cost linearly and the yield less and less,
#   so there is a best $k$ for each $a$.
#
# **Exercise.** Write `decode_attention_intensity(cfg, spec_tokens=1, kv_dtype_bytes=2)`: decode
# attention's FLOPs over its bytes for one step that verifies `spec_tokens` tokens per sequence
# (an int >= 1; 1 is ordinary decoding), with the cache at `kv_dtype_bytes` bytes per number: a
# Python `float`. Count it from the kernel, for any batch and context: FLOPs $4 \cdot
# n_\text{layers} \cdot \text{dim} \cdot \text{context\_len} \cdot s$ per sequence, bytes
# $\text{context\_len} \cdot \text{kv\_bytes\_per\_token(cfg, kv\_dtype\_bytes)}$.

# %% deletable=false nbgrader={"grade": false, "grade_id": "decode_attention_intensity", "locked": false, "schema_version": 3, "solution": true, "task": false, "checksum": "b07426cade5561d624b9cb9904a416a0", "cell_type": "code"}
def decode_attention_intensity(cfg, spec_tokens=1, kv_dtype_bytes=2):
    """FLOP/byte (a float) of decode attention verifying `spec_tokens` tokens per sequence:
    4 * n_layers * dim * spec_tokens over kv_bytes_per_token(cfg, kv_dtype_bytes), the same for
    every batch and context. Raises TypeError or ValueError for invalid inputs."""
    # YOUR CODE HERE
    raise NotImplementedError("decode_attention_intensity: implement this (see the docstring)")


# %% [markdown]
# **Too few blocks: split-KV.** Bytes are not batch-1 attention's only problem; parallelism is.
# A decode attention kernel that gives each (sequence, K/V head) pair one thread block (the
# query heads of a group share their K/V head's block, which reads that head's cache once)
# launches $\text{batch} \cdot n_\text{kv\_heads}$ blocks per layer. For Llama-3-8B at batch 1
# that is 8 blocks, on a T4 with 40 SMs or an H100 with 132: 8 SMs stream the cache while the
# rest idle, and the kernel gets a small fraction of the bandwidth the roofline assumed.
# **Split-KV** (flash-decoding, Dao et al. 2023) cuts each sequence's cache into `splits` chunks,
# one block each; a small second kernel combines the partial results (each chunk keeps its
# running maximum and sum, FlashAttention's online softmax, so the combination is exact).
#
# How many splits? "Enough to cover the SMs" is not the answer. At full bandwidth an SM needs
# about 15 KB of loads in flight on an H100 (S5.1's Little's law, with the loaded latency), more
# than one small block keeps going, so each SM wants **several** blocks. And the blocks should
# divide evenly over what the GPU runs at once: 136 blocks on 132 SMs (17 splits of Llama-3-8B's
# 8 blocks) is 1.03 "waves", and the 4 SMs that get a second block take about twice as long as
# the others while those sit idle. FlashAttention-2's heuristic (`num_splits_heuristic` in its
# `flash_api.cpp`) counts **slots**, `blocks_per_sm` = 2 blocks of 128 threads on every SM,
# leaves alone a batch that already fills 80% of them, and otherwise judges a split count $s$
# by its **wave efficiency**: with $w = \text{blocks} \cdot s / \text{slots}$ waves, the share
# of the slots that work in the waves it needs,
#
# $$\text{eff}(s) = \frac{w}{\lceil w \rceil}.$$
#
# It finds the best efficiency over the split counts allowed and takes the **fewest** splits that
# reach 85% of it (every split is a partial result to write and to combine). We allow $s$ from 1 to
# $s_\text{max} = \min\left(\text{slots}, \max\left(1, \lfloor \text{context\_len} /
# \text{min\_chunk} \rfloor\right)\right)$, so that a chunk stays long enough to be worth a block
# (FlashAttention-2 also skips split counts that give the same chunks as one fewer; we do not).
# Llama-3-8B at batch 1 and 8,192 tokens on an H100: 8 blocks and 264 slots, $s_\text{max} = 32$;
# the best efficiency is $8 \cdot 32 / 264 = 0.97$, and 28 splits are the fewest within 85% of it:
# 224 blocks of 293 tokens, 1.7 blocks per SM. At 2,048 tokens only 8 chunks of 256 are allowed, and
# 7 splits (56 blocks) reach 85% of their best: a short cache cannot fill the GPU. A batch of 32
# launches 256 blocks, over 80% of the slots: no split.
#
# **Exercise.** Write `split_kv_plan(cfg, batch, context_len, gpu, min_chunk=256,
# blocks_per_sm=2)`: a dict of four Python `int`s, `"blocks"` (before splitting, `batch *
# n_kv_heads`), `"splits"` (1 when `blocks >= 0.8 * slots`, else the rule above),
# `"split_blocks"` (blocks x splits) and `"chunk_len"`, the tokens of the longest chunk,
# `ceil(context_len / splits)`. `batch`, `context_len`, `min_chunk` and `blocks_per_sm` are
# ints >= 1; `gpu` needs `sm_count` (an int >= 1: `check_gpu` checks it). Compare exactly
# (`fractions.Fraction`, or integers: `5 * blocks >= 4 * slots`): `0.85 * best` in floating
# point can round to either side of an efficiency that equals it.

# %% deletable=false nbgrader={"grade": false, "grade_id": "split_kv_plan", "locked": false, "schema_version": 3, "solution": true, "task": false, "checksum": "d7c515f76e70cf56687878f6f1b34898", "cell_type": "code"}
def split_kv_plan(cfg, batch, context_len, gpu, min_chunk=256, blocks_per_sm=2):
    """How a decode attention kernel splits each sequence's KV cache (FlashAttention-2's rule):
    blocks = batch * n_kv_heads and slots = blocks_per_sm * sm_count; splits = 1 when
    blocks >= 0.8 * slots, else the fewest splits s in 1..min(slots, max(1, context_len //
    min_chunk)) whose wave efficiency, w / ceil(w) with w = blocks * s / slots, is at least 0.85
    times the best of that range (compared exactly). Returns {"blocks", "splits",
    "split_blocks": blocks * splits, "chunk_len": ceil(context_len / splits)}, all ints.
    Raises TypeError or ValueError for invalid inputs."""
    # YOUR CODE HERE
    raise NotImplementedError("split_kv_plan: implement this (see the docstring)")


# %% deletable=false editable=false nbgrader={"grade": true, "grade_id": "check_decode_attention", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false, "checksum": "942746aef232fe584701e4f589fa0bca", "cell_type": "code"}
def _check_decode_attention():
    self_check(decode_attention_intensity(LLAMA3_8B) == 4.0, "Llama-3-8B, fp16: 32 / 8 x 1 = 4")
    self_check(decode_attention_intensity(COURSE_MODEL) == 2.0, "the course model: 4 / 2 = 2")
    mha = {**LLAMA3_8B, "n_kv_heads": 32}
    mqa = {**LLAMA3_8B, "n_kv_heads": 1}
    self_check(decode_attention_intensity(mha) == 1.0, "multi-head attention: 1 FLOP/byte")
    self_check(decode_attention_intensity(mqa) == 32.0, "multi-query attention: n_heads")
    self_check(decode_attention_intensity(LLAMA3_8B, 4) == 16.0, "4 speculative tokens: x 4")
    self_check(decode_attention_intensity(LLAMA3_8B, 1, 1) == 8.0, "an 8-bit cache: x 2")
    got = decode_attention_intensity(LLAMA3_8B, 1, 0.5)
    self_check(type(got) is float and got == 16.0, f"a 4-bit cache: 16.0, got {got!r}")
    h100 = {"name": "H100", "sm_count": 132}
    t4 = {"name": "T4", "sm_count": 40}
    for gpu, batch, ctx, want in (
        (h100, 1, 2048, {"blocks": 8, "splits": 7, "split_blocks": 56, "chunk_len": 293}),
        (h100, 1, 8192, {"blocks": 8, "splits": 28, "split_blocks": 224, "chunk_len": 293}),
        (t4, 1, 8192, {"blocks": 8, "splits": 9, "split_blocks": 72, "chunk_len": 911}),
        (h100, 32, 8192, {"blocks": 256, "splits": 1, "split_blocks": 256, "chunk_len": 8192}),
        (h100, 12, 8192, {"blocks": 96, "splits": 5, "split_blocks": 480, "chunk_len": 1639}),
        (h100, 1, 100, {"blocks": 8, "splits": 1, "split_blocks": 8, "chunk_len": 100}),
    ):
        got = split_kv_plan(LLAMA3_8B, batch, ctx, gpu)
        self_check(got == want, f"batch {batch}, {ctx} tokens, {gpu['name']}: {want}, got {got}")
    for call, error in (
        (lambda: decode_attention_intensity(LLAMA3_8B, 0), ValueError),
        (lambda: decode_attention_intensity(LLAMA3_8B, 2.0), TypeError),
        (lambda: decode_attention_intensity(LLAMA3_8B, 1, 0), ValueError),
        (lambda: split_kv_plan(LLAMA3_8B, 1, 2048, {"sm_count": 13.2}), TypeError),
        (lambda: split_kv_plan(LLAMA3_8B, 1, 2048, {"name": "H100"}), ValueError),
        (lambda: split_kv_plan(LLAMA3_8B, 1, 2048, h100, min_chunk=0), ValueError),
        (lambda: split_kv_plan(LLAMA3_8B, 0, 2048, h100), ValueError),
        (lambda: split_kv_plan(LLAMA3_8B, 1, 2048, h100, blocks_per_sm=0), ValueError),
    ):
        expect_error(error, call, "decode_attention_intensity / split_kv_plan with a bad argument")


_check_decode_attention()
del _check_decode_attention
print("decode_attention_intensity, split_kv_plan: self-checks passed")

# %% [markdown]
# ## 16. Look at the numbers
#
# Everything below is a demonstration: it is not graded and the autograder does not run it. Each
# cell reads what it needs from `course.toml` (or its copy in the first cell) itself, so any one
# of them can be rerun on its own.
# First, both models side by side, at the milestone's context of 512 tokens and at a long
# 8192-token one, with the tokens/s ceiling at batch 32 and whether that batch fits in the T4's
# budget (90% of its 15,360 MiB).

# %% tags=["demo"]
GPU = load_hardware()[COURSE_GPU]
RIDGE = GPU["peak_flops"] / GPU["peak_bandwidth"]
print(
    f"{COURSE_GPU}: {GPU['peak_flops'] / 1e12:.0f} TFLOP/s fp16 tensor, "
    f"{GPU['peak_bandwidth'] / 1e9:.0f} GB/s -> ridge {RIDGE:.1f} FLOP/byte\n"
)

print(
    f"{'model':<14}{'params':>15}{'matmul':>15}{'KV B/token':>12}{'ctx':>6}{'I(b=1)':>9}"
    f"{'I(b=8)':>9}{'I(b=32)':>9}{'ceiling':>10}{'crossover':>11}{'tok/s b=32':>12}{'fits':>6}"
)
for cfg in (COURSE_MODEL, LLAMA3_8B):
    for ctx in (CONTEXT_LEN, 8192):
        ceiling = 2 * matmul_params(cfg) / (ctx * kv_bytes_per_token(cfg))
        row = [decode_intensity(cfg, b, ctx) for b in (1, 8, 32)]
        print(
            f"{cfg['name']:<14}{num_params(cfg):>15,}{matmul_params(cfg):>15,}"
            f"{kv_bytes_per_token(cfg):>12,}{ctx:>6}"
            f"{row[0]:>9.3f}{row[1]:>9.3f}{row[2]:>9.3f}{ceiling:>10.2f}"
            f"{str(crossover_batch(cfg, RIDGE, ctx)):>11}"
            f"{decode_tokens_per_s_bound(cfg, GPU, 32, ctx):>12,.0f}"
            f"{str(kv_cache_fits(cfg, GPU, 32, ctx)):>6}"
        )

# %% [markdown]
# ### Why `None` is the honest answer for the course model
#
# The course model has about 1.3 million weights (2.6 MB in fp16) but caches 1 KB of K and V per
# token, so a single 512-token sequence drags 0.5 MB of cache through memory at every step. Adding
# a sequence to the batch adds 2.6 MFLOP of work and 0.5 MB of traffic: about 5 FLOP per extra
# byte. That ratio is the ceiling from section 5, and it is forty times below the T4's ridge of
# 203. However large the batch, decode of this model at this context stays bandwidth-bound; the
# crossover batch does not exist, and writing `None` says exactly that. (Only a context of about
# a dozen tokens, $2P / (\text{ridge} \cdot \text{KV}) \approx 12.6$, would let batching alone get
# there.)
#
# Llama-3-8B is different because its weights are huge compared with its cache: thanks to
# grouped-query attention it caches 128 KB per token against 7.5 billion multiplied weights. At
# 512 tokens its ceiling is $2 \cdot 7.50 \times 10^9 / (512 \cdot 131{,}072) \approx 224$
# FLOP/byte, just above the T4's ridge, so a crossover exists, but only at a batch of 2,212
# sequences, and such a batch would not fit anywhere: 16.06 GB of weights (every parameter
# counts for memory) plus 2,212 x 512 tokens x 128 KB of cache is about 165 GB, more than the
# 77 GB an H100's budget holds, or an H200's 136 GB (`kv_cache_fits` says so). Past about 564 tokens of context,
# $2P / (\text{ridge} \cdot \text{KV})$, the ceiling drops under the ridge and the crossover
# disappears for Llama-3-8B too; on the H100, whose ridge is 295, it is gone past 388. Section 10
# says why: the aggregate hides a weight kernel that turns compute-bound at batch 204 and an
# attention kernel stuck at 4 FLOP/byte. The lesson generalises: for long contexts the KV cache,
# not the weights, sets the speed of decode, which is why serving systems care so much about
# cache size (grouped-query attention, cache quantization, paged caches).
#
# The sweep below shows the crossover vanishing as the context grows.

# %% tags=["demo"]
GPU = load_hardware()[COURSE_GPU]
RIDGE = GPU["peak_flops"] / GPU["peak_bandwidth"]
print(f"crossover batch on the {COURSE_GPU} (ridge {RIDGE:.1f} FLOP/byte) vs context length")
print(f"{'context':>8}{COURSE_MODEL['name']:>16}{LLAMA3_8B['name']:>14}")
for ctx in (0, 8, 12, 13, 16, 128, 256, 512, 563, 564, 700, 1024, 8192):
    print(
        f"{ctx:>8}{str(crossover_batch(COURSE_MODEL, RIDGE, ctx)):>16}"
        f"{str(crossover_batch(LLAMA3_8B, RIDGE, ctx)):>14}"
    )

# %% [markdown]
# ### The roofline
#
# Each model on a GPU that can hold it: the course model on the T4 (the roof built from
# `course.toml`), and Llama-3-8B on the H100, since its 16.06 GB of fp16 weights do not fit in a
# T4's budget. Each panel marks the three decode points at 512 tokens of context (batch 1, 8 and
# 32, each labelled), the ridge, where the roof turns flat, and the model's batch-to-infinity
# ceiling, $2P / (\text{context\_len} \cdot \text{KV bytes per token})$, the intensity no batch
# can pass. The course model's ceiling sits far left of the T4's ridge, which is the picture of
# `crossover_batch` returning `None`; Llama-3-8B's sits left of the H100's ridge too (224 against
# 295). The T4 panel also draws the practical roof of section 5 (about 24 TFLOP/s sustained,
# `sustained_fp16_tflops` in course.toml).
#
# The roofline is an upper bound that assumes every byte comes from DRAM, and it is pessimistic
# for the course model: a batch-1 step touches $2.62 + 0.52 = 3.15$ MB (weights plus one
# sequence's cache), which fits entirely in the T4's 4 MB L2 cache, so from the second step on
# most of it need not come from DRAM at all. And as the next section shows, launch overhead, not
# memory, sets its real step time. Treat the picture as a first-order map, not a prediction.

# %% tags=["demo"]
import matplotlib.pyplot as plt
import numpy as np

HW = load_hardware()
# course.toml's sustained_fp16_tflops: a T4 on long fp16 GEMMs under its 70 W cap (section 5)
_sustained = hardware_tables()[0][COURSE_GPU].get("sustained_fp16_tflops")
SUSTAINED_FLOPS = None if _sustained is None else _sustained * 1e12


def draw_roof(ax, gpu, label):
    ai = np.logspace(-1, 3.5, 400)
    ax.loglog(
        ai,
        np.minimum(ai * gpu["peak_bandwidth"], gpu["peak_flops"]) / 1e12,
        "k-",
        lw=2,
        label=f"{label} roof",
    )
    ridge = gpu["peak_flops"] / gpu["peak_bandwidth"]
    ax.axvline(ridge, color="gray", linestyle=":", linewidth=1.5)
    ax.annotate(
        f"ridge {ridge:.0f}",
        (ridge, 0.02),
        xytext=(-4, 0),
        textcoords="offset points",
        rotation=90,
        ha="right",
        va="bottom",
        color="gray",
        fontsize=8,
    )
    return ridge


fig, axes = plt.subplots(1, 2, figsize=(13, 5.2))
for ax, (cfg, gpu_name, color) in zip(
    axes,
    ((COURSE_MODEL, COURSE_GPU, "tab:blue"), (LLAMA3_8B, "H100_SXM", "tab:orange")),
    strict=True,
):
    gpu = HW[gpu_name]
    draw_roof(ax, gpu, gpu_name)
    if gpu_name == COURSE_GPU and SUSTAINED_FLOPS is not None:
        ax.axhline(
            SUSTAINED_FLOPS / 1e12,
            color="tab:red",
            linestyle="-.",
            linewidth=1,
            label=f"practical roof, ~{SUSTAINED_FLOPS / 1e12:.0f} TFLOP/s sustained",
        )
    batches = (1, 8, 32)
    xs = np.array([decode_intensity(cfg, b, CONTEXT_LEN) for b in batches])
    ys = np.minimum(xs * gpu["peak_bandwidth"], gpu["peak_flops"]) / 1e12
    ax.scatter(
        xs, ys, s=60, zorder=3, color=color, label=f"{cfg['name']} decode, context {CONTEXT_LEN}"
    )
    for b, x, y in zip(batches, xs, ys, strict=True):
        ax.annotate(
            f"b={b}", (x, y), xytext=(-8, 8), textcoords="offset points", fontsize=8, ha="right"
        )
    ceiling = 2 * matmul_params(cfg) / (CONTEXT_LEN * kv_bytes_per_token(cfg))
    ax.axvline(
        ceiling,
        color=color,
        linestyle="--",
        linewidth=1,
        label=f"batch-to-infinity ceiling {ceiling:.3g} FLOP/byte",
    )
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("attainable performance (TFLOP/s)")
    ax.set_title(f"{cfg['name']} on the {gpu_name} (fp16 weights and KV cache)")
    ax.set_ylim(0.01, gpu["peak_flops"] / 1e12 * 3)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# ### The two kernels on the roofline, and the 8-bit roof
#
# The same roofs, now with the two kernels of section 10 plotted separately, for Llama-3-8B at
# 512 tokens: on the T4 with 4-bit weights (4.16 bits with their group scales and zero points,
# 16-bit embedding and head: 0.62 bytes for each multiplied weight, section 8) and an 8-bit
# cache, the precisions
# that let it fit there; on the H100 in fp16. The weight matmuls (circles) slide right with the
# batch and climb onto the flat roof; attention (crosses) does not move at all, whatever the
# batch. The dashed roof is the 8-bit tensor cores' (INT8 on the T4, FP8 on the H100): W8A8
# kernels would run under it, twice as high, while the 4-bit weights of W4A16 only move the
# points right, under the fp16 roof.

# %% tags=["demo"]
import matplotlib.pyplot as plt
import numpy as np

HW, TABLES = load_hardware(), hardware_tables()[0]
W4_READ = quantized_weight_bytes(LLAMA3_8B, 4)["read"] / matmul_params(LLAMA3_8B)
SETUPS = ((COURSE_GPU, W4_READ, 1), ("H100_SXM", 2, 2))  # (gpu, dtype_bytes, kv_dtype_bytes)
fig, axes = plt.subplots(1, 2, figsize=(13, 5.2))
for ax, (gpu_name, wbytes, kbytes) in zip(axes, SETUPS, strict=True):
    gpu = HW[gpu_name]
    ai = np.logspace(-1, 3.5, 400)
    ax.loglog(
        ai,
        np.minimum(ai * gpu["peak_bandwidth"], gpu["peak_flops"]) / 1e12,
        "k-",
        lw=2,
        label=f"{gpu_name} fp16 tensor roof",
    )
    table = TABLES[gpu_name]
    eight = table.get("fp8_tensor_tflops", table.get("int8_tensor_tops"))
    if eight is not None:
        kind = "FP8" if "fp8_tensor_tflops" in table else "INT8"
        ax.loglog(
            ai,
            np.minimum(ai * gpu["peak_bandwidth"], eight * 1e12) / 1e12,
            "k--",
            lw=1,
            label=f"{kind} tensor roof (W8A8), ridge {eight * 1e12 / gpu['peak_bandwidth']:.0f}",
        )
    ridge = gpu["peak_flops"] / gpu["peak_bandwidth"]
    ax.axvline(ridge, color="gray", linestyle=":", linewidth=1.5, label=f"fp16 ridge {ridge:.0f}")
    for b in (1, 16, 64, 256):
        step = decode_step_breakdown(LLAMA3_8B, b, CONTEXT_LEN, gpu, wbytes, kbytes)
        for kernel, marker, color in (("weights", "o", "tab:blue"), ("attention", "X", "tab:red")):
            k = step[kernel]
            y = min(k["intensity"] * gpu["peak_bandwidth"], gpu["peak_flops"]) / 1e12
            first = b == 1
            ax.scatter(
                k["intensity"],
                y,
                marker=marker,
                s=70,
                color=color,
                zorder=3,
                label=(
                    f"{kernel} matmuls"
                    if kernel == "weights"
                    else "attention (the same point at every batch)"
                )
                if first
                else None,
            )
            if kernel == "weights":
                ax.annotate(
                    f"b={b}",
                    (k["intensity"], y),
                    xytext=(-8, 8),
                    textcoords="offset points",
                    fontsize=8,
                    ha="right",
                )
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("attainable performance (TFLOP/s)")
    ax.set_title(
        f"Llama-3-8B decode kernels on the {gpu_name}\n"
        f"{wbytes:.2g} B per weight, {kbytes:g} B per cached number, context {CONTEXT_LEN}"
    )
    ax.set_ylim(0.1, (eight or gpu["peak_flops"] / 1e12) * 3)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# ### Tokens/s and time per token against the batch
#
# Now the serving engineer's plot: for Llama-3-8B at 512 tokens of context, the batch's tokens/s
# ($\text{batch} / \text{TPOT}$) and the time per output token, against the batch, from
# `decode_step_breakdown`. Two vertical lines bound what batching can buy: where the weight
# matmuls turn compute-bound ($\text{ridge} \cdot w / 2$: past it, a bigger batch costs time in
# proportion), and the memory-capacity wall (`max_batch_that_fits`, within the 90% budget and
# beside the 3 GiB runtime: past it, the caches do not fit). On the T4 the 4-bit weights turn
# compute-bound at batch 64, well inside its wall of 165; on the H100 in fp16, at 296 against a
# wall of 859 (past a wall the
# curves fade: those batches do not fit). Past the first line tokens/s stops rising: both
# kernels' times now grow in proportion to the batch (the weights on the compute roof, attention
# on the bandwidth roof), so a bigger batch only makes every token wait longer. The batch worth
# running is near the line where the weights turn compute-bound, provided it is left of the wall.

# %% tags=["demo"]
import matplotlib.pyplot as plt
import numpy as np

HW = load_hardware()
Q4 = quantized_weight_bytes(LLAMA3_8B, 4)
W4_READ, W4_RESIDENT = Q4["read"] / matmul_params(LLAMA3_8B), Q4["resident"] / num_params(LLAMA3_8B)
# (gpu, bytes per multiplied weight, per resident weight, per cached number, colour)
SETUPS = ((COURSE_GPU, W4_READ, W4_RESIDENT, 1, "tab:blue"), ("H100_SXM", 2, 2, 2, "tab:orange"))
fig, (ax_rate, ax_time) = plt.subplots(1, 2, figsize=(13, 5))
batches = np.unique(np.logspace(0, 12, 200, base=2).astype(int))
for gpu_name, w_read, w_resident, kbytes, color in SETUPS:
    gpu = HW[gpu_name]
    tpot = np.array(
        [
            decode_step_breakdown(LLAMA3_8B, int(b), CONTEXT_LEN, gpu, w_read, kbytes)["time_s"]
            for b in batches
        ]
    )
    label = f"{gpu_name}, {w_read:.2g} B weights, {kbytes:g} B cache"
    wall = max_batch_that_fits(LLAMA3_8B, gpu, CONTEXT_LEN, w_resident, kbytes)
    fits = batches <= wall
    ax_rate.loglog(batches[fits], (batches / tpot)[fits], color=color, label=label)
    ax_time.loglog(batches[fits], (tpot * 1e3)[fits], color=color, label=label)
    for ax, ys in ((ax_rate, batches / tpot), (ax_time, tpot * 1e3)):  # past the wall: faint
        ax.loglog(batches[~fits], ys[~fits], color=color, alpha=0.25, linestyle="--")
    turn = math.ceil(gpu["peak_flops"] / gpu["peak_bandwidth"] * w_read / 2)
    print(f"{gpu_name}: weights compute-bound from batch {turn}, memory wall {wall}")
    for ax in (ax_rate, ax_time):
        ax.axvline(
            wall,
            color=color,
            linestyle="-",
            alpha=0.5,
            linewidth=3,
            label=f"{gpu_name} memory wall: batch {wall}",
        )
        ax.axvline(
            turn,
            color=color,
            linestyle=":",
            linewidth=1.5,
            label=f"{gpu_name} weights compute-bound from batch {turn}",
        )
ax_rate.set_ylabel("decode tokens/s, whole batch (roofline bound)")
ax_time.set_ylabel("time per output token (ms)")
for ax in (ax_rate, ax_time):
    ax.set_xlabel("batch (sequences decoded together)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
ax_rate.set_title(f"Llama-3-8B at {CONTEXT_LEN} tokens: throughput")
ax_time.set_title(f"Llama-3-8B at {CONTEXT_LEN} tokens: latency")
fig.tight_layout()
plt.show()

# %% [markdown]
# ### Throughput at a latency target
#
# Continuous batching's question, asked for every TPOT target at once: the largest batch that
# meets it (`max_batch_under_tpot`) and the tokens/s that batch delivers, for Llama-3-8B on the
# H100 at three contexts. Each curve climbs while a looser target buys a bigger batch, then goes
# flat at the memory wall; the longer the context, the lower the wall and the sooner it does.

# %% tags=["demo"]
import matplotlib.pyplot as plt
import numpy as np

HW = load_hardware()
gpu = HW["H100_SXM"]
targets = np.logspace(np.log10(5e-3), np.log10(0.1), 60)
fig, ax = plt.subplots(figsize=(8, 5))
for ctx in (512, 2048, 8192):
    rates = []
    for target in targets:
        b = max_batch_under_tpot(LLAMA3_8B, gpu, ctx, float(target))
        step = decode_step_breakdown(LLAMA3_8B, b, ctx, gpu)["time_s"] if b else math.inf
        rates.append(b / step)
    ax.plot(targets * 1e3, rates, label=f"context {ctx}")
ax.set_xscale("log")
ax.set_xlabel("TPOT target (ms): every user sees at least 1 / TPOT tokens/s")
ax.set_ylabel("tokens/s of the whole batch (roofline bound)")
ax.set_title("Llama-3-8B on the H100, fp16: throughput bought with latency")
ax.grid(True, which="both", alpha=0.3)
ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# ### Prefill against decode, and the regime below the roofline
#
# TTFT and TPOT for a 512-token prompt at batch 1, from `ttft_and_tpot`:

# %% tags=["demo"]
HW = load_hardware()
W4_READ = quantized_weight_bytes(LLAMA3_8B, 4)["read"] / matmul_params(LLAMA3_8B)
for cfg, gpu_name, wbytes, kbytes in (
    (COURSE_MODEL, COURSE_GPU, 2, 2),
    (COURSE_MODEL, "H100_SXM", 2, 2),
    (LLAMA3_8B, COURSE_GPU, W4_READ, 1),
    (LLAMA3_8B, "H100_SXM", 2, 2),
):
    ttft, tpot = ttft_and_tpot(cfg, 1, CONTEXT_LEN, HW[gpu_name], wbytes, kbytes)
    print(
        f"{cfg['name']:<13} {gpu_name:<9} weights {wbytes:.2g} B, cache {kbytes:g} B: "
        f"TTFT {ttft * 1e3:8.4f} ms   TPOT {tpot * 1e3:8.4f} ms"
    )

# %% [markdown]
# The course model's numbers are too good to be true. On the T4 its whole decode step should take
# about 10 µs by the roofline, but a step is not one kernel: each layer launches a dozen or so
# (two RMSNorms, the q/k/v projections, RoPE, attention, the output projection, the three MLP
# matmuls and their SiLU-multiply, two residual adds), plus the embedding, the final norm and the
# head. Each launch costs CPU and driver time whatever the kernel does: about 3 to 5 µs when
# C++ launches it, and some 10 to 20 µs for each operation of eager PyTorch (Python and the
# dispatcher come on top of the driver). (S5.1's demo timed Numba launching from Python, which
# costs tens of microseconds.) With $k$ kernels per step and $t_\text{launch}$ per launch,
#
# $$t_\text{step} \ge \max\left(k \cdot t_\text{launch},\; \text{the roofline time}\right),$$
#
# and for the course model the first term wins by an order of magnitude: decode is
# **overhead-bound**, a regime the roofline cannot show. The cure is to launch less (CUDA graphs,
# which replay a whole step as one launch, and fused kernels), not to move fewer bytes. The cell
# below puts numbers on it with 4 µs per launch, the middle of the C++ range, and 15 µs, eager
# PyTorch's: at 15 µs even Llama-3-8B's 387 launches (5.8 ms) outlast its 4.5 ms roofline step on
# an H100, which is why serving engines capture their decode steps as CUDA graphs.

# %% tags=["demo"]
HW = load_hardware()
# a launch from C++: 3 to 5 us; an eager PyTorch operation: 10 to 20 us (Numba: tens of us)
for LAUNCH_S in (4e-6, 15e-6):
    for cfg in (COURSE_MODEL, LLAMA3_8B):
        kernels = 12 * cfg["n_layers"] + 3
        gpu = HW["H100_SXM"] if cfg is LLAMA3_8B else HW[COURSE_GPU]
        roof = decode_step_breakdown(cfg, 1, CONTEXT_LEN, gpu)["time_s"]
        print(
            f"{cfg['name']:<13} on the {gpu['name']:<9}: roofline {roof * 1e6:9.1f} µs, "
            f"{kernels} launches x {LAUNCH_S * 1e6:.0f} µs = {kernels * LAUNCH_S * 1e6:7.1f} µs"
            f" -> {'overhead' if kernels * LAUNCH_S > roof else 'roofline'}-bound"
        )

# %% [markdown]
# ### Split-KV across the course GPUs
#
# How many blocks a batch-1 decode attention launches per layer, and how `split_kv_plan` spreads
# them, for Llama-3-8B on each GPU of `course.toml`: without the split, at most 8 SMs read the
# cache.

# %% tags=["demo"]
HW = load_hardware()
print(
    f"{'gpu':<10}{'SMs':>5}{'context':>9}{'blocks':>8}{'splits':>8}{'blocks now':>12}"
    f"{'chunk':>7}{'SMs busy before -> after':>27}"
)
for name, gpu in HW.items():
    for ctx in (512, 2048, 8192, 32768):
        plan = split_kv_plan(LLAMA3_8B, 1, ctx, gpu)
        before = min(plan["blocks"], gpu["sm_count"]) / gpu["sm_count"]
        after = min(plan["split_blocks"], gpu["sm_count"]) / gpu["sm_count"]
        print(
            f"{name:<10}{gpu['sm_count']:>5}{ctx:>9}{plan['blocks']:>8}{plan['splits']:>8}"
            f"{plan['split_blocks']:>12}{plan['chunk_len']:>7}{before:>17.0%} -> {after:.0%}"
        )

# %% [markdown]
# ## 17. Record the milestone
#
# The last cell computes the record for `COURSE_MODEL` (or your own model, if you changed it) at
# `CONTEXT_LEN` on the course GPU and stores it as `metrics.json["m9_roofline"]` at the repository
# root, next to `course.toml` (opened on its own, with no `course.toml` above it, the notebook
# writes `metrics.json` into the working folder: put it at the root of your fork). Commit
# `metrics.json` with your notebook. You are done when:
#
# * `metrics.json["m9_roofline"]` holds `intensity_b1`, `intensity_b8`, `intensity_b32`,
#   `crossover_batch` (a number, or `null` when no batch reaches the ridge) and a one-line
#   `conclusion` saying that batch-1 decode is deeply bandwidth-bound;
# * the record is what your own `m9_record` returns: the grader calls your `m9_record` with the
#   model, GPU, context and dtype the record names and credits the record only when it gets the
#   same figures back (and the reference agrees); the model must be a valid config at least the
#   course model's size, which means at least as many weights as the course model
#   (`num_params(model) >= num_params(COURSE_MODEL)`, 1,311,872; no single dimension is checked,
#   so a wider model with a smaller vocabulary is fine), and its `gpu` must be the course GPU as
#   `load_hardware()` reads it (the grader checks the figures against its own `course.toml`);
# * your `m9_record` is right in general, not only for the record: the grader also calls it on
#   model configs, GPUs and contexts it draws (a different draw for each student) and credits the
#   record only when every answer agrees with the reference solution, so a record computed by a
#   table of the course model's numbers earns nothing;
# * the self-check cells above all pass;
# * the public tests pass: from the root of your repository (the folder holding `course.toml`),
#   run `pytest tests/public/m9_roofline`. It grades your `exercises/m9_roofline` notebook and
#   the `metrics.json` beside `course.toml`.

# %% tags=["demo"]
GPU = load_hardware()[COURSE_GPU]
record = m9_record(COURSE_MODEL, GPU, CONTEXT_LEN)
metrics_path = default_metrics_path()
save_metric(metrics_path, "m9_roofline", record)
print(json.dumps(record, indent=2))
print(f"\nwrote metrics.json['m9_roofline'] to {metrics_path}")
