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
# # S5.2 Milestone M9: place your model's decode on the T4 roofline
#
# In S5.1 you drew a roofline: a GPU can never go faster than its peak FLOP/s, and a kernel that
# moves bytes from DRAM can never go faster than bandwidth x (FLOPs per byte). Today you apply that
# picture to the workload the whole project is heading towards: **generating text, one token per
# step, with the small LLaMA-style model of the course**.
#
# By the end of this notebook you will have:
#
# 1. counted the parameters of a LLaMA-style model from its config;
# 2. counted the bytes the KV cache adds for every token of context;
# 3. computed the arithmetic intensity of one decode step at batch 1, 8 and 32;
# 4. found the smallest batch (if any!) at which decode stops being bandwidth-bound on a T4;
# 5. turned the bytes into the tokens/s ceiling a serving engineer quotes, and checked whether the
#    batch fits in the GPU's memory at all;
# 6. written the numbers and a one-line conclusion to `metrics.json["m9_roofline"]`.
#
# **Rules the grader holds you to.** Bad arguments raise `ValueError` with a message naming the
# argument (the hidden tests call every function with bad ones); return types are the plain
# Python ones each docstring names (`int`, `float`, `bool`, `dict`, or `None`); and the grader
# draws its own model configs, contexts and GPUs, so write the general formula, not the course
# model's numbers.
#
# Everything here is arithmetic on a config dict: **no GPU is needed**.
#
# ### Before you start: open the notebook inside the course repository
#
# The GPU figures (peak FLOP/s, bandwidth) are not typed into this notebook. They live in one
# place, `course.toml` at the root of the course repository, and the notebook reads them from
# there. `metrics.json` is written next to it. So run this notebook from a checkout of your fork.
# On Colab, run these in a cell first (replace the URL with your fork's):
#
# ```
# !git clone https://github.com/<your-user>/<your-fork>.git
# %cd <your-fork>/exercises/m9_roofline
# ```
#
# On your own machine, open the notebook from `exercises/m9_roofline/` inside your clone.
# Nothing needs installing: the graded code uses only the standard library, and the plot uses
# numpy and matplotlib, which Colab already has.

# %%
import contextlib
import json
import math
import numbers
import os
import tempfile
from fractions import Fraction
from pathlib import Path

try:
    import tomllib  # Python 3.11+
except ModuleNotFoundError:  # pragma: no cover - older Pythons
    import tomli as tomllib

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
# `LLAMA3_8B` has the shape of Llama-3-8B; we use it only on paper, as a comparison. (Its 8.03
# billion fp16 weights take 16.06 GB: as much as a T4's entire 16 GB, with nothing left for the
# KV cache, the activations or the CUDA runtime itself. Section 8 makes that check a function.)
# If you trained your own model with a different shape, put its config in `COURSE_MODEL`.

# %%
COURSE_GPU = "T4"  # a key of the [hardware.*] tables in course.toml
CONTEXT_LEN = 512  # tokens already in the KV cache when we measure a decode step

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
# A few helpers are provided so you can concentrate on the ideas: `check_int` turns a bad integer
# argument into a `ValueError` that says what was wrong, `check_gpu` does the same for a GPU dict,
# and `find_course_root` walks up from the current directory to the folder that holds
# `course.toml`.


# %%
import re  # for the self-checks


def check_int(value, what, minimum):
    """Return `value` as an int, or raise ValueError if it is not an int >= `minimum`.

    bool is rejected even though Python treats it as an int: `batch=True` is a bug, not a batch.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{what} must be an int, got {value!r} ({type(value).__name__})")
    if value < minimum:
        raise ValueError(f"{what} must be >= {minimum}, got {value}")
    return int(value)


def find_course_root(start=None):
    """The nearest directory at or above `start` (default: the cwd) holding course.toml, or None."""
    here = Path(start if start is not None else os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "course.toml").is_file():
            return folder
    return None


def default_metrics_path():
    """`<repository root>/metrics.json`, or `./metrics.json` when no course.toml is found."""
    root = find_course_root()
    return (root if root is not None else Path(os.getcwd())) / "metrics.json"


def check_gpu(gpu, keys):
    """Raise ValueError unless `gpu` is a dict whose `keys` hold positive, finite numbers."""
    if not isinstance(gpu, dict):
        raise ValueError(f"gpu must be a dict like load_hardware()['T4'], got {type(gpu).__name__}")
    for key in keys:
        if key not in gpu:
            raise ValueError(f"gpu dict is missing {key!r} (see load_hardware)")
        value = gpu[key]
        if (
            isinstance(value, bool)
            or not isinstance(value, numbers.Real)
            or not math.isfinite(value)
            or value <= 0
        ):
            raise ValueError(f"gpu[{key!r}] must be a positive number, got {value!r}")


def self_check(ok, message):
    """Self-check helper: an AssertionError with `message` unless `ok`."""
    if not ok:
        raise AssertionError(message)


# %% [markdown]
# ## 1. Check the config before you trust it
#
# Every function below starts from a config dict, so we check it once, carefully, in one place.
# A good error message names the key and says what was expected. Raise `ValueError` when:
#
# * `cfg` is not a dict, has a key outside `CONFIG_KEYS + OPTIONAL_CONFIG_KEYS`, or lacks one of
#   `CONFIG_KEYS`;
# * one of the six integer keys is not an `int` (a `bool` does not count) or is not positive;
# * `tied_embeddings` is not a `bool`, or `name` (when present) is not a `str`;
# * `dim` is not a multiple of `n_heads` (heads split the width evenly), or `n_heads` is not a
#   multiple of `n_kv_heads` (each K/V head serves the same number of query heads).
#
# `check_int` does half of this for you.


# %% nbgrader={"grade": false, "grade_id": "validate_config", "locked": false, "schema_version": 3, "solution": true, "task": false}
def validate_config(cfg):
    """Raise ValueError (naming the offending key) unless `cfg` is a valid model config.

    Returns None. Accepts the keys in CONFIG_KEYS (all required) and OPTIONAL_CONFIG_KEYS.
    """
    ### BEGIN SOLUTION
    if not isinstance(cfg, dict):
        raise ValueError(f"a model config must be a dict, got {type(cfg).__name__}")
    allowed = set(CONFIG_KEYS) | set(OPTIONAL_CONFIG_KEYS)
    unknown = sorted((k for k in cfg if k not in allowed), key=repr)
    if unknown:
        raise ValueError(
            f"unknown config key(s) {unknown}; a config has exactly the keys "
            f"{list(CONFIG_KEYS)} (plus an optional 'name')"
        )
    missing = [k for k in CONFIG_KEYS if k not in cfg]
    if missing:
        raise ValueError(f"config is missing key(s) {missing}")
    for key in CONFIG_INT_KEYS:
        check_int(cfg[key], f"config key {key!r}", 1)
    if not isinstance(cfg["tied_embeddings"], bool):
        raise ValueError(
            f"config key 'tied_embeddings' must be True or False, got {cfg['tied_embeddings']!r}"
        )
    if "name" in cfg and not isinstance(cfg["name"], str):
        raise ValueError(f"config key 'name' must be a str, got {cfg['name']!r}")
    if cfg["dim"] % cfg["n_heads"] != 0:
        raise ValueError(
            f"config key 'dim' ({cfg['dim']}) must be a multiple of 'n_heads' ({cfg['n_heads']})"
        )
    if cfg["n_heads"] % cfg["n_kv_heads"] != 0:
        raise ValueError(
            f"config key 'n_heads' ({cfg['n_heads']}) must be a multiple of "
            f"'n_kv_heads' ({cfg['n_kv_heads']})"
        )
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_validate_config", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
validate_config(COURSE_MODEL)
validate_config(LLAMA3_8B)
for broken in (
    {**COURSE_MODEL, "n_layer": 4},  # unknown key (a typo)
    {k: v for k, v in COURSE_MODEL.items() if k != "dim"},  # missing key
    {**COURSE_MODEL, "n_layers": 0},  # not positive
    {**COURSE_MODEL, "dim": 128.0},  # not an int
    {**COURSE_MODEL, "tied_embeddings": 1},  # not a bool
    {**COURSE_MODEL, "n_heads": 3},  # 128 % 3 != 0
    {**COURSE_MODEL, "n_kv_heads": 3},  # 4 % 3 != 0
):
    try:
        validate_config(broken)
    except ValueError:
        pass
    else:
        raise AssertionError(f"validate_config accepted a broken config: {broken}")
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


# %% nbgrader={"grade": false, "grade_id": "num_params", "locked": false, "schema_version": 3, "solution": true, "task": false}
def num_params(cfg):
    """Number of weights (an int) of the LLaMA-style model described by `cfg`.

    Counts the embedding, every layer's wq/wk/wv/wo, w1/w2/w3 and two RMSNorm gains, the final
    RMSNorm gain, and the output head unless `tied_embeddings` is True. Raises ValueError for an
    invalid config (see validate_config).
    """
    ### BEGIN SOLUTION
    validate_config(cfg)
    dim = cfg["dim"]
    head_dim = dim // cfg["n_heads"]
    kv_dim = cfg["n_kv_heads"] * head_dim
    embedding = cfg["vocab_size"] * dim
    head = 0 if cfg["tied_embeddings"] else cfg["vocab_size"] * dim
    attention = 2 * dim * dim + 2 * dim * kv_dim
    mlp = 3 * dim * cfg["ffn_hidden_dim"]
    norms = 2 * dim
    per_layer = attention + mlp + norms
    return int(embedding + head + cfg["n_layers"] * per_layer + dim)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_num_params", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
assert isinstance(num_params(COURSE_MODEL), int), "num_params must return a Python int"
assert num_params(COURSE_MODEL) < 2_000_000, "the course model is small (under 2M weights)"
# Llama-3-8B really has about 8.03 billion weights.
assert abs(num_params(LLAMA3_8B) - 8.03e9) < 0.01e9, (
    f"Llama-3-8B has about 8.03e9 weights, got {num_params(LLAMA3_8B):,}"
)
# Untying the output head adds exactly one more vocab x dim matrix.
_untied = {**COURSE_MODEL, "tied_embeddings": False}
assert num_params(_untied) - num_params(COURSE_MODEL) == 4096 * 128, (
    "an untied output head adds one vocab_size x dim matrix"
)
# A two-layer, one-head toy you can count on paper: 4*4 + 2*(2*16 + 2*16 + 3*4*8 + 2*4) + 4
_toy = {
    "dim": 4,
    "n_layers": 2,
    "n_heads": 1,
    "n_kv_heads": 1,
    "vocab_size": 4,
    "ffn_hidden_dim": 8,
    "tied_embeddings": True,
}
assert num_params(_toy) == 16 + 2 * (32 + 32 + 96 + 8) + 4, (
    f"the two-layer toy has 356 weights, got {num_params(_toy)}"
)
print("num_params: self-checks passed")

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
# (the leading 2 is "K and V"; `dtype_bytes` is 2 for fp16/bf16). Grouped-query attention exists
# precisely to shrink this number: Llama-3-8B has 32 query heads but caches only 8 K/V heads.
#
# At every decode step the attention of the new token reads the whole cache, so a sequence with
# `context_len` tokens costs `context_len x KV bytes per token` of extra DRAM traffic per step.


# %% nbgrader={"grade": false, "grade_id": "kv_bytes_per_token", "locked": false, "schema_version": 3, "solution": true, "task": false}
def kv_bytes_per_token(cfg, dtype_bytes=2):
    """Bytes (an int) of K and V cached for one token, summed over all layers and K/V heads.

    `dtype_bytes` is the size of one cached number in bytes (2 for fp16/bf16) and must be a
    positive int. Raises ValueError for an invalid config or dtype_bytes.
    """
    ### BEGIN SOLUTION
    validate_config(cfg)
    dtype_bytes = check_int(dtype_bytes, "dtype_bytes", 1)
    head_dim = cfg["dim"] // cfg["n_heads"]
    return int(2 * cfg["n_layers"] * cfg["n_kv_heads"] * head_dim * dtype_bytes)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_kv_bytes_per_token", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# 2 (K,V) x 4 layers x 2 KV heads x 32 channels x 2 bytes
assert kv_bytes_per_token(COURSE_MODEL) == 1024, "course model: 2 x 4 x 2 x 32 x 2 = 1024 bytes"
# Llama-3-8B: 128 KiB per token in fp16, so an 8192-token context is a full 1 GiB per sequence.
assert kv_bytes_per_token(LLAMA3_8B) == 128 * 1024, "Llama-3-8B: 2 x 32 x 8 x 128 x 2 bytes"
assert kv_bytes_per_token(COURSE_MODEL, dtype_bytes=4) == 2048, "fp32 doubles the bytes"
for _bad in (0, -2, 2.0, True):
    try:
        kv_bytes_per_token(COURSE_MODEL, dtype_bytes=_bad)
    except ValueError:
        pass
    else:
        raise AssertionError(f"dtype_bytes={_bad!r} should be rejected")
print("kv_bytes_per_token: self-checks passed")

# %% [markdown]
# ## 4. Arithmetic intensity of one decode step
#
# **FLOPs.** Producing one token means pushing one vector through every weight matrix. Each weight
# takes part in one multiply and one add, so a decode step costs about
# $2 \times \text{params}$ FLOPs **per sequence**. With a batch of `batch` sequences decoded
# together, that is $2 \times \text{params} \times \text{batch}$.
#
# Attention over the cache adds work the weights do not count: per layer, the new token's query
# meets every cached key ($2 \cdot \text{dim} \cdot \text{context\_len}$ FLOPs for the scores, all
# heads together) and the scores weight every cached value (as many again), so
# $4 \cdot n_\text{layers} \cdot \text{dim} \cdot \text{context\_len}$ FLOPs per sequence. That is
# not small for a small model: for the course model at 512 tokens it is
# $4 \cdot 4 \cdot 128 \cdot 512 \approx 1.05$ MFLOP, about 40% of its $2 \cdot \text{params}
# \approx 2.6$ MFLOP (for Llama-3-8B at 512 tokens, about 2%). The milestone leaves it out **by
# design**, so that every function here has one formula you can check by hand; counting it would
# raise the intensities a little and move no conclusion, since the points stay far left of the
# ridge.
#
# **Bytes.** The weights are read from DRAM once per step, **shared by the whole batch**:
# $\text{params} \times \text{dtype\_bytes}$. The KV cache is not shared: each sequence reads its
# own, $\text{context\_len} \times \text{KV bytes per token}$. So
#
# $$\text{bytes} = \text{params} \cdot \text{dtype\_bytes} + \text{batch} \cdot
# \text{context\_len} \cdot \text{KV bytes per token}$$
#
# $$\text{intensity} = \frac{\text{FLOPs}}{\text{bytes}}
# = \frac{2 \cdot \text{params} \cdot \text{batch}}{\text{params} \cdot \text{dtype\_bytes}
# + \text{batch} \cdot \text{context\_len} \cdot \text{KV}}$$
#
# Look at batch 1 with an empty cache: 2 FLOPs per weight and 2 bytes per fp16 weight, so the
# intensity is **1 FLOP/byte**. With a cache it is even lower. That single number is why
# decoding one sequence at a time is slow on every GPU ever built.


# %% nbgrader={"grade": false, "grade_id": "decode_intensity", "locked": false, "schema_version": 3, "solution": true, "task": false}
def decode_intensity(cfg, batch, context_len, dtype_bytes=2):
    """Arithmetic intensity (FLOP/byte, a float) of one decode step.

    FLOPs = 2 * params * batch; bytes = params * dtype_bytes
    + batch * context_len * kv_bytes_per_token(cfg, dtype_bytes).
    `batch` is the number of sequences decoded together (an int >= 1), `context_len` the number of
    tokens already in each sequence's KV cache (an int >= 0; 0 means no KV traffic), `dtype_bytes`
    the bytes per weight and per cached number (a positive int). Raises ValueError otherwise.
    """
    ### BEGIN SOLUTION
    batch = check_int(batch, "batch", 1)
    context_len = check_int(context_len, "context_len", 0)
    kv = kv_bytes_per_token(cfg, dtype_bytes)  # validates cfg and dtype_bytes
    params = num_params(cfg)
    flops = 2 * params * batch  # grader: public
    traffic = params * dtype_bytes + batch * context_len * kv
    return flops / traffic  # exact ints, one correctly rounded division
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_decode_intensity", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# No KV traffic, fp16: exactly 1 FLOP/byte at batch 1, and batch FLOP/byte in general.
assert decode_intensity(COURSE_MODEL, 1, 0) == 1.0, "no cache, fp16, batch 1: 1 FLOP/byte"
assert decode_intensity(COURSE_MODEL, 8, 0) == 8.0, "no cache, fp16: the intensity is the batch"
# The KV cache only ever lowers the intensity, and batching only ever raises it.
assert decode_intensity(COURSE_MODEL, 1, CONTEXT_LEN) < 1.0, "the cache adds bytes, not FLOPs"
_curve = [decode_intensity(COURSE_MODEL, b, CONTEXT_LEN) for b in (1, 2, 8, 32, 1024)]
assert all(a < b for a, b in zip(_curve[:-1], _curve[1:], strict=True)), (
    f"the intensity must grow with the batch, got {_curve}"
)
assert isinstance(decode_intensity(LLAMA3_8B, 1, CONTEXT_LEN), float), "return a Python float"
for _args in ((0, 16), (1, -1), (1.5, 16)):
    try:
        decode_intensity(COURSE_MODEL, *_args)
    except ValueError:
        pass
    else:
        raise AssertionError(f"decode_intensity(cfg, *{_args}) should raise ValueError")
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
# of the time, and no kernel tuning can change that, because the bytes have to be read.
#
# **Batching** is the cure the serving systems use: the weights are read once and reused by every
# sequence in the batch, so the FLOPs grow with the batch while the weight bytes do not. But the
# KV term grows with the batch too. Divide the top and bottom of the intensity by `batch` and let
# the batch grow:
#
# $$\lim_{\text{batch}\to\infty} \text{intensity} =
# \frac{2 \cdot \text{params}}{\text{context\_len} \cdot \text{KV bytes per token}}$$
#
# If that ceiling is at or below the ridge, **no batch ever reaches it**, and the right answer is
# `None`, not a large number. Otherwise, solving $\text{intensity}(b) \ge \text{ridge}$ for $b$
# gives
#
# $$b \ge \frac{\text{ridge} \cdot \text{params} \cdot \text{dtype\_bytes}}
# {2 \cdot \text{params} - \text{ridge} \cdot \text{context\_len} \cdot \text{KV}}$$
#
# and the answer is the smallest integer that satisfies it. Floating point can put a value that
# should land exactly on the boundary one step off, so finish by checking your `b` against
# `decode_intensity`: it must reach the ridge, and `b - 1` (if `b > 1`) must not.


# %% nbgrader={"grade": false, "grade_id": "crossover_batch", "locked": false, "schema_version": 3, "solution": true, "task": false}
def crossover_batch(cfg, ridge, context_len, dtype_bytes=2):
    """Smallest batch (an int >= 1) whose decode intensity is >= `ridge`, or None if none is.

    `ridge` is the GPU's ridge point in FLOP/byte (a positive number), `context_len` the tokens
    in each sequence's KV cache (an int >= 0; with 0 there is no KV traffic and a crossover always
    exists). Returns None when the intensity's limit 2*params / (context_len * KV bytes per token)
    is <= ridge. The result agrees with decode_intensity: intensity(b) >= ridge and, for b > 1,
    intensity(b - 1) < ridge. Raises ValueError for a non-positive ridge or invalid arguments.
    """
    ### BEGIN SOLUTION
    if isinstance(ridge, bool) or not isinstance(ridge, numbers.Real) or not math.isfinite(ridge):
        raise ValueError(f"ridge must be a finite number of FLOP/byte, got {ridge!r}")
    if ridge <= 0:
        raise ValueError(f"ridge must be > 0 FLOP/byte, got {ridge}")
    context_len = check_int(context_len, "context_len", 0)
    kv = kv_bytes_per_token(cfg, dtype_bytes)  # validates cfg and dtype_bytes
    params = num_params(cfg)
    r = Fraction(float(ridge))  # exact, so the None test below has no rounding error
    denominator = 2 * params - r * context_len * kv
    if denominator <= 0:
        return None
    b = max(1, math.ceil(r * params * dtype_bytes / denominator))
    # Agree with the floating-point intensity at the boundary (at most a step or two).
    for _ in range(64):
        if b > 1 and decode_intensity(cfg, b - 1, context_len, dtype_bytes) >= ridge:
            b -= 1
        elif decode_intensity(cfg, b, context_len, dtype_bytes) < ridge:
            b += 1
        else:
            break
    return int(b)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_crossover_batch", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# Without a KV cache the fp16 intensity is exactly `batch`, so the crossover is ceil(ridge).
assert crossover_batch(COURSE_MODEL, 100.0, 0) == 100, "no cache: the crossover is ceil(ridge)"
assert crossover_batch(COURSE_MODEL, 100.5, 0) == 101, "no cache: the crossover is ceil(ridge)"
# A ridge below the batch-1 intensity is crossed immediately.
assert crossover_batch(COURSE_MODEL, 0.5, CONTEXT_LEN) == 1, "batch 1 already reaches ridge 0.5"
# Llama-3-8B on a T4-like ridge of 203: crosses at a short context, never at a long one.
_b = crossover_batch(LLAMA3_8B, 203.125, 512)
assert _b is not None and 1000 < _b < 2000, f"Llama-3-8B at 512 tokens crosses near 1,500: {_b}"
assert decode_intensity(LLAMA3_8B, _b, 512) >= 203.125 > decode_intensity(LLAMA3_8B, _b - 1, 512), (
    "the crossover must agree with decode_intensity: b reaches the ridge, b - 1 does not"
)
assert crossover_batch(LLAMA3_8B, 203.125, 8192) is None, "at 8192 tokens no batch gets there"
# The course model's KV cache grows as fast as its FLOPs: no batch gets there at 512 tokens.
assert crossover_batch(COURSE_MODEL, 203.125, CONTEXT_LEN) is None, (
    "the course model's ceiling at 512 tokens is about 5 FLOP/byte: the answer is None"
)
for _ridge in (0, -1.0):
    try:
        crossover_batch(COURSE_MODEL, _ridge, CONTEXT_LEN)
    except ValueError:
        pass
    else:
        raise AssertionError(f"ridge={_ridge!r} should raise ValueError")
print("crossover_batch: self-checks passed")

# %% [markdown]
# ## 6. Read the hardware table from `course.toml`
#
# The peak figures of the course GPUs are kept in exactly one place, the `[hardware.<name>]` tables
# of `course.toml` at the repository root, in the units vendors quote: `fp16_tensor_tflops`
# (TFLOP/s), `bandwidth_gbs` (GB/s) and `memory_gb` (GB of device memory, 1 GB = 1e9 bytes). Copying them into a notebook is how two numbers that should
# agree end up disagreeing, so read them instead, and convert to plain SI units (FLOP/s and
# byte/s) once, at the boundary.
#
# `load_hardware(path=None)` finds `course.toml` by walking up from the current directory
# (`find_course_root` does that) unless you give it a path, parses it with the standard library's
# `tomllib`, and returns one dict per GPU with exactly four keys: `{"name": <short name>,
# "peak_flops": ..., "peak_bandwidth": ..., "memory_bytes": ...}` (FLOP/s, byte/s, bytes; the
# short name is the table's key, such as `"T4"`). When there is no `course.toml`, raise
# `FileNotFoundError` with a message that tells the student what to do (open the notebook from a
# checkout; on Colab, clone the fork); when a table lacks one of the three figures or has one that
# is not a positive number, raise `ValueError` naming the table and the key.


# %% nbgrader={"grade": false, "grade_id": "load_hardware", "locked": false, "schema_version": 3, "solution": true, "task": false}
def load_hardware(path=None):
    """Read the [hardware.*] tables of course.toml into {short_name: gpu dict}.

    Each gpu dict is {"name": short_name, "peak_flops": FLOP/s (fp16 tensor), "peak_bandwidth":
    byte/s, "memory_bytes": bytes}. `path` is course.toml or the folder holding it; by default it
    is found by walking up from the current directory. Raises FileNotFoundError when there is no course.toml, ValueError
    when an entry lacks a figure or has a non-positive one.
    """
    ### BEGIN SOLUTION
    if path is None:
        root = find_course_root()  # grader: public
        if root is None:
            raise FileNotFoundError(
                f"course.toml not found in {os.getcwd()} or any folder above it. Open this notebook "
                "from a checkout of the course repository (on Colab: clone your fork first, then "
                "%cd into exercises/m9_roofline; see the top of the notebook)."
            )
        path = root / "course.toml"
    path = Path(path)  # grader: public
    if path.is_dir():
        path = path / "course.toml"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} does not exist. Open this notebook from a checkout of the course repository "
            "(on Colab: clone your fork first)."
        )
    with path.open("rb") as fh:
        document = tomllib.load(fh)
    table = document.get("hardware")
    if not isinstance(table, dict) or not table:
        raise ValueError(f"{path} has no [hardware.<name>] tables")
    hardware = {}
    for short_name, entry in table.items():
        figures = {}
        for key in ("fp16_tensor_tflops", "bandwidth_gbs", "memory_gb"):
            value = entry.get(key) if isinstance(entry, dict) else None
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
                raise ValueError(
                    f"[hardware.{short_name}] in {path} needs a positive number for {key!r}, "
                    f"got {value!r}"
                )
            figures[key] = float(value)
        hardware[short_name] = {
            "name": short_name,
            "peak_flops": figures["fp16_tensor_tflops"] * 1e12,
            "peak_bandwidth": figures["bandwidth_gbs"] * 1e9,
            "memory_bytes": figures["memory_gb"] * 1e9,
        }
    return hardware
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_load_hardware", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_hw = load_hardware()
assert COURSE_GPU in _hw, f"course.toml defines {sorted(_hw)}; {COURSE_GPU} is missing"
_t4 = _hw[COURSE_GPU]
assert set(_t4) == {"name", "peak_flops", "peak_bandwidth", "memory_bytes"}, (
    f"each gpu dict has exactly name, peak_flops, peak_bandwidth and memory_bytes: {sorted(_t4)}"
)
assert _t4["name"] == COURSE_GPU, f"the name is the table's key, {COURSE_GPU!r}: {_t4['name']!r}"
# SI units: tens of TFLOP/s are 1e13-ish FLOP/s, hundreds of GB/s are 1e11-ish byte/s.
assert 1e13 < _t4["peak_flops"] < 1e15 and 1e11 < _t4["peak_bandwidth"] < 1e13, (
    "convert TFLOP/s and GB/s to FLOP/s and byte/s"
)
assert _t4["memory_bytes"] == 16e9, "the T4's 16 GB are 16e9 bytes"
assert round(_t4["peak_flops"] / _t4["peak_bandwidth"]) == 203, "the T4 ridge is about 203"
try:
    load_hardware(Path(tempfile.gettempdir()) / "no-such-folder" / "course.toml")
except FileNotFoundError:
    pass
else:
    raise AssertionError("a missing course.toml should raise FileNotFoundError")
print("load_hardware: self-checks passed")

# %% [markdown]
# ## 7. The milestone record
#
# Now put it together. For a config, a GPU (a dict as returned by `load_hardware`) and a context
# length, compute the intensities at batch 1, 8 and 32, the crossover batch against the GPU's
# ridge, and a **one-line conclusion** a reader can check against the numbers. The conclusion is a
# single line (no newline) that names batch 1 (written `batch 1` or `batch-1`) and says how it
# compares with the ridge: when batch 1 is below the ridge it must say so with the word
# `bandwidth` or `memory` (as in "batch-1 decode is deeply bandwidth-bound"), and it should quote
# the intensity and the ridge.
#
# The record also carries everything needed to recompute it: `params`, `context_len`,
# `dtype_bytes`, the `gpu` dict and the `model` config itself. The autograder redoes the arithmetic
# from those fields with its own copy of the hardware table, so a record whose numbers do not follow
# from its inputs will not pass.


# %% nbgrader={"grade": false, "grade_id": "m9_record", "locked": false, "schema_version": 3, "solution": true, "task": false}
def m9_record(cfg, gpu, context_len, dtype_bytes=2):
    """The dict to store as metrics.json["m9_roofline"].

    `gpu` is {"name": str, "peak_flops": FLOP/s, "peak_bandwidth": byte/s, ...} (extra keys such
    as memory_bytes are kept). Returns the keys
    intensity_b1, intensity_b8, intensity_b32 (FLOP/byte, floats), crossover_batch (int or None,
    against the ridge peak_flops / peak_bandwidth), conclusion (one line of text), params (int),
    context_len, dtype_bytes, gpu (a copy of the gpu dict) and model (a copy of cfg). Raises
    ValueError for an invalid config, gpu dict or argument.
    """
    ### BEGIN SOLUTION
    validate_config(cfg)
    check_gpu(gpu, ("peak_flops", "peak_bandwidth"))
    if not isinstance(gpu.get("name"), str) or not gpu["name"]:
        raise ValueError(f"gpu['name'] must be a non-empty str, got {gpu.get('name')!r}")
    context_len = check_int(context_len, "context_len", 0)
    dtype_bytes = check_int(dtype_bytes, "dtype_bytes", 1)

    ridge = float(gpu["peak_flops"]) / float(gpu["peak_bandwidth"])
    params = num_params(cfg)
    i1, i8, i32 = (float(decode_intensity(cfg, b, context_len, dtype_bytes)) for b in (1, 8, 32))
    crossover = crossover_batch(cfg, ridge, context_len, dtype_bytes)

    if i1 < ridge / 10:
        verdict = "deeply bandwidth-bound"
    elif i1 < ridge:
        verdict = "bandwidth-bound"
    else:
        verdict = "compute-bound"
    if crossover is None:
        ceiling = 2 * params / (context_len * kv_bytes_per_token(cfg, dtype_bytes))
        tail = (
            f"no batch reaches the ridge at context {context_len}, because the KV cache grows "
            f"with the batch and caps the intensity at {ceiling:.3g} FLOP/byte"
        )
    elif crossover == 1:
        tail = "batch 1 already reaches the ridge"
    else:
        tail = f"the smallest batch that reaches the ridge at context {context_len} is {crossover}"
    conclusion = (
        f"At batch 1 decode is {verdict}: {i1:.3g} FLOP/byte vs a {gpu['name']} ridge of "
        f"{ridge:.0f} FLOP/byte ({100 * i1 / ridge:.2g}% of it); batch 8 gives {i8:.3g} and "
        f"batch 32 gives {i32:.3g} FLOP/byte; {tail}."
    )
    return {
        "intensity_b1": i1,
        "intensity_b8": i8,
        "intensity_b32": i32,
        "crossover_batch": crossover,
        "conclusion": conclusion,
        "params": int(params),
        "context_len": context_len,
        "dtype_bytes": dtype_bytes,
        "gpu": dict(gpu),
        "model": dict(cfg),
    }
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_m9_record", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_toy_gpu = {"name": "toy", "peak_flops": 100.0, "peak_bandwidth": 1.0}  # ridge 100 FLOP/byte
_rec = m9_record(COURSE_MODEL, _toy_gpu, CONTEXT_LEN)
for _key in (
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
    assert _key in _rec, f"m9_record's dict lacks {_key!r}"
assert _rec["intensity_b1"] == decode_intensity(COURSE_MODEL, 1, CONTEXT_LEN), (
    "intensity_b1 must be decode_intensity(cfg, 1, context_len)"
)
assert _rec["intensity_b32"] == decode_intensity(COURSE_MODEL, 32, CONTEXT_LEN), (
    "intensity_b32 must be decode_intensity(cfg, 32, context_len)"
)
assert _rec["crossover_batch"] == crossover_batch(COURSE_MODEL, 100.0, CONTEXT_LEN), (
    "crossover_batch must be computed against the gpu's ridge, peak_flops / peak_bandwidth"
)
assert _rec["params"] == num_params(COURSE_MODEL) and _rec["model"] == COURSE_MODEL, (
    "the record carries params and a copy of the config"
)
_line = _rec["conclusion"]
assert isinstance(_line, str) and "\n" not in _line, "the conclusion is one line of text"
assert re.search(r"batch[ -]1\b", _line.lower()), f"the conclusion names batch 1: {_line!r}"
assert "bandwidth" in _line.lower() or "memory" in _line.lower(), (
    f"batch 1 is below the ridge, so the conclusion says bandwidth- (memory-) bound: {_line!r}"
)
_ = json.dumps(_rec, allow_nan=False)  # plain JSON data, ready for metrics.json
print("m9_record: self-checks passed")

# %% [markdown]
# ## 8. Tokens per second, and whether it fits
#
# Intensity tells you *which* limit you hit. A serving engineer wants the number that follows from
# it: how many tokens per second a GPU can produce at best. When decode is bandwidth-bound, one
# step of the whole batch cannot take less time than reading its bytes once:
#
# $$t_\text{step} \ge \frac{\text{bytes per step}}{\text{bandwidth}}
# = \frac{\text{params} \cdot \text{dtype\_bytes} + \text{batch} \cdot \text{context\_len}
# \cdot \text{KV bytes per token}}{\text{peak\_bandwidth}}$$
#
# and each step produces one token for each of the `batch` sequences, so the ceiling on the
# batch's combined rate is $\text{batch} / t_\text{step}$ tokens/s. At batch 1 with an empty cache
# on the T4 that is $320 \times 10^9 / (2 \cdot \text{params})$: about 122,000 tokens/s for the
# course model (its 2.6 MB of weights), and 20 tokens/s for Llama-3-8B (16 GB per step). No
# kernel beats this bound, and real ones reach some fraction of it. It is a bandwidth ceiling
# only: past the crossover batch the compute ceiling, $\text{peak\_flops} / (2 \cdot
# \text{params})$ tokens/s, is the lower of the two.
#
# Batching raises the ceiling, but only while the batch fits in memory: the weights and every
# sequence's KV cache have to be resident at once,
#
# $$\text{params} \cdot \text{dtype\_bytes} + \text{batch} \cdot \text{context\_len} \cdot
# \text{KV bytes per token} \le \text{memory\_bytes}.$$
#
# A crossover batch that does not fit is not a batch you can run. (The bound counts no
# activations, no workspace and no CUDA context, so a `True` here is necessary, not sufficient.)
#
# **Exercise.** Write `decode_tokens_per_s_bound(cfg, gpu, batch, context_len, dtype_bytes=2)`,
# which returns the ceiling above as a Python `float` in tokens per second (for the whole batch,
# not per sequence), and `kv_cache_fits(cfg, gpu, batch, context_len, dtype_bytes=2)`, which
# returns a Python `bool`: `True` when the weights plus the batch's KV cache take at most
# `gpu["memory_bytes"]` bytes (exactly equal counts as fitting). `gpu` is a dict as returned by
# `load_hardware`: the first function needs its `peak_bandwidth`, the second its `memory_bytes`,
# and a missing or non-positive figure raises `ValueError` (`check_gpu` does that). `batch` is an
# int >= 1, `context_len` an int >= 0 and `dtype_bytes` a positive int, as in
# `decode_intensity`; anything else raises `ValueError`.


# %% nbgrader={"grade": false, "grade_id": "decode_tokens_per_s_bound", "locked": false, "schema_version": 3, "solution": true, "task": false}
def decode_tokens_per_s_bound(cfg, gpu, batch, context_len, dtype_bytes=2):
    """Bandwidth ceiling on the batch's decode rate, tokens/s (a float).

    batch / ((params * dtype_bytes + batch * context_len * KV bytes per token) /
    gpu["peak_bandwidth"]). Raises ValueError for an invalid config, gpu dict or argument.
    """
    ### BEGIN SOLUTION
    check_gpu(gpu, ("peak_bandwidth",))
    batch = check_int(batch, "batch", 1)
    context_len = check_int(context_len, "context_len", 0)
    kv = kv_bytes_per_token(cfg, dtype_bytes)  # validates cfg and dtype_bytes
    step_bytes = num_params(cfg) * dtype_bytes + batch * context_len * kv
    return float(batch * gpu["peak_bandwidth"] / step_bytes)
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "kv_cache_fits", "locked": false, "schema_version": 3, "solution": true, "task": false}
def kv_cache_fits(cfg, gpu, batch, context_len, dtype_bytes=2):
    """True when the weights and `batch` sequences' KV caches fit in gpu["memory_bytes"].

    Compares params * dtype_bytes + batch * context_len * KV bytes per token with the memory
    (equal fits). Returns a Python bool; raises ValueError for invalid inputs.
    """
    ### BEGIN SOLUTION
    check_gpu(gpu, ("memory_bytes",))
    batch = check_int(batch, "batch", 1)
    context_len = check_int(context_len, "context_len", 0)
    kv = kv_bytes_per_token(cfg, dtype_bytes)
    needed = num_params(cfg) * dtype_bytes + batch * context_len * kv
    return bool(needed <= gpu["memory_bytes"])
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_serving", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_t4_like = {"name": "T4", "peak_flops": 65e12, "peak_bandwidth": 320e9, "memory_bytes": 16e9}
_rate = decode_tokens_per_s_bound(COURSE_MODEL, _t4_like, 1, 0)
self_check(type(_rate) is float, f"decode_tokens_per_s_bound must return a float, got {_rate!r}")
self_check(
    abs(_rate - 320e9 / (2 * num_params(COURSE_MODEL))) < 1e-6 * _rate,
    f"batch 1, no cache: bandwidth / weight bytes = {320e9 / (2 * num_params(COURSE_MODEL)):.6g}"
    f" tokens/s, got {_rate!r}",
)
_llama_rate = decode_tokens_per_s_bound(LLAMA3_8B, _t4_like, 1, 0)
self_check(19 < _llama_rate < 21, f"Llama-3-8B on a T4: about 20 tokens/s, got {_llama_rate!r}")
self_check(
    decode_tokens_per_s_bound(COURSE_MODEL, _t4_like, 8, CONTEXT_LEN)
    > decode_tokens_per_s_bound(COURSE_MODEL, _t4_like, 1, CONTEXT_LEN),
    "a bigger batch shares the weight reads: the ceiling rises",
)
self_check(kv_cache_fits(COURSE_MODEL, _t4_like, 32, CONTEXT_LEN) is True, "the course model fits")
self_check(
    kv_cache_fits(LLAMA3_8B, _t4_like, 1, CONTEXT_LEN) is False,
    "Llama-3-8B's 16.06 GB of fp16 weights alone exceed a 16 GB T4",
)
_exact = {**_t4_like, "memory_bytes": 2 * num_params(COURSE_MODEL) + 512 * 1024}
self_check(kv_cache_fits(COURSE_MODEL, _exact, 1, 512) is True, "exactly full still fits")
for _call in (
    lambda: decode_tokens_per_s_bound(COURSE_MODEL, {"peak_bandwidth": 0.0}, 1, 0),
    lambda: decode_tokens_per_s_bound(COURSE_MODEL, _t4_like, 0, 0),
    lambda: kv_cache_fits(COURSE_MODEL, {"name": "T4"}, 1, 0),
    lambda: kv_cache_fits(COURSE_MODEL, _t4_like, 1, -1),
):
    try:
        _call()
    except ValueError:
        pass
    else:
        raise AssertionError("a bad gpu dict, batch or context_len must raise ValueError")
print("decode_tokens_per_s_bound, kv_cache_fits: self-checks passed")

# %% [markdown]
# ## 9. Write `metrics.json` without ever losing a key
#
# Each milestone adds one key to the same `metrics.json` at the repository root, and the autograder
# reads them all. A careless writer (open with `"w"`, dump only your key) deletes the other
# milestones' results. Yours must:
#
# * **take the path as a `str` or a `pathlib.Path`** (the grader passes both);
# * **check the key**: it must be a non-empty `str`, or raise `ValueError`;
# * **merge**: read the existing JSON object, set `data[key] = value`, write everything back;
# * **refuse to guess**: if the file exists but is not a valid JSON object, raise `ValueError`
#   naming the file and saying how to fix it, instead of starting from `{}` and dropping keys;
# * **reject bad values**: anything JSON cannot represent, and NaN or infinity (which Python's
#   `json` would happily write, but strict JSON readers refuse), is a `ValueError`;
# * **be atomic**: write to a temporary file in the same folder, then `os.replace` it over the
#   target, so a crash midway leaves either the old file or the new one, never half of one;
# * write with sorted keys and an indent of 2, so diffs between commits stay readable.


# %% nbgrader={"grade": false, "grade_id": "save_metric", "locked": false, "schema_version": 3, "solution": true, "task": false}
def save_metric(path, key, value):
    """Set metrics[key] = value in the JSON file at `path`, keeping every other key.

    `path` is a str or a pathlib.Path. `key` is a non-empty str; `value` must be plain JSON data with no NaN or infinity
    (ValueError otherwise). A missing or empty file counts as {}; a file that is not a JSON object
    raises ValueError naming it. The file is replaced atomically (temp file + os.replace) and
    written with sorted keys and indent 2. Returns None.
    """
    ### BEGIN SOLUTION
    path = Path(path)
    if not isinstance(key, str) or not key:
        raise ValueError(f"the metrics key must be a non-empty str, got {key!r}")
    try:
        encoded = json.dumps(value, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError) as exc:  # grader: public
        raise ValueError(
            f"metrics[{key!r}] must be plain JSON data (dict with str keys, list, str, int, float, "
            f"bool, None) with no NaN or infinity: {exc}"
        ) from None

    data = {}
    if path.exists():
        text = path.read_text(encoding="utf-8")
        if text.strip():
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(
                    f"{path} is not valid JSON ({exc}); repair it by hand (or move it aside if "
                    "it holds nothing you need) and run this cell again"
                ) from None
            if not isinstance(data, dict):  # grader: public
                raise ValueError(
                    f"{path} holds a JSON {type(data).__name__}, not an object of metrics; repair "
                    "it by hand (or move it aside) and run this cell again"
                )
    data[key] = json.loads(encoded)

    fd, tmp_name = tempfile.mkstemp(
        prefix=f".{path.name}.", suffix=".tmp", dir=path.parent if str(path.parent) else "."
    )
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, sort_keys=True, allow_nan=False)
            fh.write("\n")
            fh.flush()  # grader: public
            os.fsync(fh.fileno())  # grader: public
        os.chmod(tmp_name, 0o644)
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_save_metric", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
with tempfile.TemporaryDirectory() as _tmp:
    _path = Path(_tmp) / "metrics.json"
    save_metric(_path, "m1", {"loss": 2.5})
    save_metric(_path, "m9_roofline", {"crossover_batch": None})
    self_check(
        json.loads(_path.read_text())
        == {"m1": {"loss": 2.5}, "m9_roofline": {"crossover_batch": None}},
        "the second save_metric must keep the first key",
    )
    save_metric(str(_path), "m1", 3)  # a str path works too; overwriting one key keeps the other
    self_check(
        json.loads(_path.read_text()) == {"m1": 3, "m9_roofline": {"crossover_batch": None}},
        "save_metric(str path, 'm1', 3) must overwrite m1 and keep m9_roofline",
    )
    try:
        save_metric(_path, "", 1)
    except ValueError:
        pass
    else:
        raise AssertionError("an empty key must raise ValueError")
    for _bad in (float("nan"), {"x": float("inf")}, object()):
        try:
            save_metric(_path, "bad", _bad)
        except ValueError:
            pass
        else:
            raise AssertionError(f"save_metric accepted {_bad!r}")
    _path.write_text("{not json")
    try:
        save_metric(_path, "m9_roofline", 1)
    except ValueError as _exc:
        self_check("metrics.json" in str(_exc), f"the error must name the file: {_exc}")
    else:
        raise AssertionError("a corrupt metrics.json must raise ValueError, not be overwritten")
    self_check(_path.read_text() == "{not json", "a corrupt file must be left as it was")
    self_check(
        sorted(p.name for p in Path(_tmp).iterdir()) == ["metrics.json"], "temp file left behind"
    )
print("save_metric: self-checks passed")

# %% [markdown]
# ## 10. Look at the numbers
#
# Everything below is a demonstration: it is not graded and the autograder does not run it. Each
# cell reads what it needs from `course.toml` itself, so any one of them can be rerun on its own.
# First, both models side by side, at the milestone's context of 512 tokens and at a long
# 8192-token one, with the tokens/s ceiling at batch 32 and whether that batch fits on the T4.

# %% tags=["demo"]
GPU = load_hardware()[COURSE_GPU]
RIDGE = GPU["peak_flops"] / GPU["peak_bandwidth"]
print(
    f"{COURSE_GPU}: {GPU['peak_flops'] / 1e12:.0f} TFLOP/s fp16 tensor, "
    f"{GPU['peak_bandwidth'] / 1e9:.0f} GB/s -> ridge {RIDGE:.1f} FLOP/byte\n"
)

print(
    f"{'model':<14}{'params':>15}{'KV B/token':>12}{'ctx':>6}{'I(b=1)':>9}{'I(b=8)':>9}"
    f"{'I(b=32)':>9}{'ceiling':>10}{'crossover':>11}{'tok/s b=32':>12}{'fits':>6}"
)
for cfg in (COURSE_MODEL, LLAMA3_8B):
    for ctx in (CONTEXT_LEN, 8192):
        ceiling = 2 * num_params(cfg) / (ctx * kv_bytes_per_token(cfg))
        row = [decode_intensity(cfg, b, ctx) for b in (1, 8, 32)]
        print(
            f"{cfg['name']:<14}{num_params(cfg):>15,}{kv_bytes_per_token(cfg):>12,}{ctx:>6}"
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
# crossover batch does not exist, and writing `None` says exactly that. (It would take a context
# of about a dozen tokens for batching alone to get there.)
#
# Llama-3-8B is different because its weights are huge compared with its cache: thanks to
# grouped-query attention it caches 128 KB per token against 8 billion weights. At 512 tokens its
# ceiling is about 240 FLOP/byte, just above the ridge, so a crossover exists, but only at a batch
# of well over a thousand sequences (1,344 on the T4), and such a batch would not even fit:
# 16 GB of weights plus 1,344 x 512 tokens x 128 KB of cache is about 106 GB, more than an 80 GB
# H100 holds (`kv_cache_fits` says so). Past roughly 600 tokens of context the ceiling drops under
# the ridge and the crossover disappears for Llama-3-8B too. The lesson generalises: for long
# contexts the KV cache, not the weights, sets the speed of decode, which is why serving systems
# care so much about cache size (grouped-query attention, cache quantization, paged caches).
#
# The sweep below shows the crossover vanishing as the context grows.

# %% tags=["demo"]
GPU = load_hardware()[COURSE_GPU]
RIDGE = GPU["peak_flops"] / GPU["peak_bandwidth"]
print(f"crossover batch on the {COURSE_GPU} (ridge {RIDGE:.1f} FLOP/byte) vs context length")
print(f"{'context':>8}{COURSE_MODEL['name']:>16}{LLAMA3_8B['name']:>14}")
for ctx in (0, 8, 12, 16, 128, 256, 512, 600, 700, 1024, 8192):
    print(
        f"{ctx:>8}{str(crossover_batch(COURSE_MODEL, RIDGE, ctx)):>16}"
        f"{str(crossover_batch(LLAMA3_8B, RIDGE, ctx)):>14}"
    )

# %% [markdown]
# ### The roofline
#
# The T4's roof (built from the figures in `course.toml`) with the three decode points of the
# course model at 512 tokens of context, and Llama-3-8B's for comparison. Two vertical lines frame
# the story: the ridge, where the roof turns flat, and for each model its batch-to-infinity
# ceiling, $2 \cdot \text{params} / (\text{context\_len} \cdot \text{KV bytes per token})$, the
# intensity no batch can pass. The course model's ceiling sits far left of the ridge, which is the
# picture of `crossover_batch` returning `None`; Llama-3-8B's sits just right of it.
#
# The roofline is an upper bound that assumes every byte comes from DRAM. A model as small as the
# course model would partly stay in the T4's 4 MB L2 cache, and kernel launch overheads would
# dominate its real step time; treat the picture as a first-order map, not a prediction.

# %% tags=["demo"]
import matplotlib.pyplot as plt
import numpy as np

GPU = load_hardware()[COURSE_GPU]
RIDGE = GPU["peak_flops"] / GPU["peak_bandwidth"]
peak_tflops = GPU["peak_flops"] / 1e12
bw_tbs = GPU["peak_bandwidth"] / 1e12
ai = np.logspace(-1, 3.5, 400)
roof = np.minimum(ai * bw_tbs, peak_tflops)

fig, ax = plt.subplots(figsize=(9.5, 5.5))
ax.loglog(ai, roof, "k-", linewidth=2, label=f"{COURSE_GPU} roof (fp16 tensor, GDDR6)")
ax.axvline(RIDGE, color="gray", linestyle=":", linewidth=1.5)
ax.annotate(
    f"ridge {RIDGE:.0f} FLOP/byte",
    (RIDGE, 0.02),
    xytext=(-6, 0),
    textcoords="offset points",
    rotation=90,
    ha="right",
    va="bottom",
    color="gray",
)
styles = ((COURSE_MODEL, "o", "tab:blue", (6, -14)), (LLAMA3_8B, "s", "tab:orange", (6, 6)))
for cfg, marker, color, offset in styles:
    xs = np.array([decode_intensity(cfg, b, CONTEXT_LEN) for b in (1, 8, 32)])
    ys = np.minimum(xs * bw_tbs, peak_tflops)
    ax.scatter(
        xs,
        ys,
        marker=marker,
        s=60,
        zorder=3,
        color=color,
        label=f"{cfg['name']}, batch 1 / 8 / 32, context {CONTEXT_LEN}",
    )
    ax.annotate("b=1", (xs[0], ys[0]), xytext=offset, textcoords="offset points", fontsize=8)
    ax.annotate("b=32", (xs[2], ys[2]), xytext=offset, textcoords="offset points", fontsize=8)
    ceiling = 2 * num_params(cfg) / (CONTEXT_LEN * kv_bytes_per_token(cfg))
    ax.axvline(
        ceiling,
        color=color,
        linestyle="--",
        linewidth=1,
        label=f"{cfg['name']}: batch-to-infinity ceiling {ceiling:.3g} FLOP/byte",
    )
ax.set_xlabel("arithmetic intensity (FLOP/byte)")
ax.set_ylabel("attainable performance (TFLOP/s)")
ax.set_title(f"Decode on the {COURSE_GPU} roofline (fp16 weights and KV cache)")
ax.set_ylim(0.01, peak_tflops * 3)
ax.grid(True, which="both", alpha=0.3)
ax.legend(loc="upper left", fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 11. Record the milestone
#
# The last cell computes the record for `COURSE_MODEL` (or your own model, if you changed it) at
# `CONTEXT_LEN` on the course GPU and stores it as `metrics.json["m9_roofline"]` at the repository
# root, next to `course.toml`. Commit `metrics.json` with your notebook. You are done when:
#
# * `metrics.json["m9_roofline"]` holds `intensity_b1`, `intensity_b8`, `intensity_b32`,
#   `crossover_batch` (a number, or `null` when no batch reaches the ridge) and a one-line
#   `conclusion` saying that batch-1 decode is deeply bandwidth-bound;
# * the record is what your own `m9_record` returns: the grader calls your `m9_record` with the
#   model, GPU, context and dtype the record names and credits the record only when it gets the
#   same figures back (and the reference agrees); the model must be a valid config at least the
#   course model's size, and its `gpu` must be the course GPU as `load_hardware()` reads it (the
#   grader checks the figures against its own `course.toml`);
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
