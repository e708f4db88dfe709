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
# 1. counted the parameters of a LLaMA-style model from its config, and the ones a decode step
#    actually multiplies;
# 2. counted the bytes the KV cache adds for every token of context;
# 3. computed the arithmetic intensity of one decode step at batch 1, 8 and 32;
# 4. found the smallest batch (if any!) at which decode stops being bandwidth-bound on a T4;
# 5. turned the bytes into the tokens/s ceiling a serving engineer quotes, and checked whether the
#    batch fits in the GPU's memory at all;
# 6. split a decode step into its two kinds of kernel (weight matmuls, attention over the cache),
#    and set prefill against decode: time to first token against time per output token;
# 7. written the numbers and a one-line conclusion to `metrics.json["m9_roofline"]`.
#
# **Rules the grader holds you to.** One error convention holds for every function in this
# notebook: a value of the wrong type raises `TypeError`, a value of the right type that is out
# of range raises `ValueError`, and either message names the argument. An integer argument must
# be a Python `int` (or a numpy integer); a `bool` is not an integer here, so `batch=True` or a
# config with `dim=128.0` is a `TypeError`, while `batch=0` or `n_layers=0` is a `ValueError`.
# The hidden tests call every function with bad arguments of both kinds. Return types are the
# plain Python ones each docstring names (`int`, `float`, `bool`, `str`, `dict`, `tuple` or
# `None`), and the grader draws its own model configs, contexts and GPUs, so write the general
# formula, not the course model's numbers.
#
# Everything here is arithmetic on a config dict: **no GPU is needed**.
#
# ### Before you start: where the GPU figures come from
#
# The GPU figures (peak FLOP/s, bandwidth, memory) live in one place, `course.toml` at the root
# of the course repository. When the course is released, a copy of its `[hardware]` tables is
# written into the first code cell below (`COURSE_HARDWARE`), generated from `course.toml`, so
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
COURSE_HARDWARE = {}

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
# A few helpers are provided so you can concentrate on the ideas. Each follows the notebook's
# error convention (`TypeError` for a wrong type, `ValueError` for a value out of range):
# `check_int` checks an integer argument, `check_bytes` a size in bytes per number (an int or a
# float, so that 0.5 can stand for a 4-bit weight), `check_gpu` a GPU dict,
# `find_course_root` walks up from the current directory to the folder that holds `course.toml`,
# and `hardware_tables` returns course.toml's `[hardware]` tables (from the file when there is
# one, else from the copy in the first cell; section 6 uses it).
# `says_bandwidth_bound` is the rule section 7's conclusion is graded by.


# %%
import re  # for the self-checks and says_bandwidth_bound


def check_int(value, what, minimum):
    """Return `value` as an int: TypeError unless it is an integer, ValueError if < `minimum`.

    bool is rejected even though Python treats it as an int: `batch=True` is a bug, not a batch.
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
    FileNotFoundError when the file is missing and there is no copy to use instead.
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
    """TypeError unless `gpu` is a dict whose `keys` hold real numbers; ValueError when one is
    missing, not finite or not positive."""
    if not isinstance(gpu, dict):
        raise TypeError(f"gpu must be a dict like load_hardware()['T4'], got {type(gpu).__name__}")
    for key in keys:
        if key not in gpu:
            raise ValueError(f"gpu dict is missing {key!r} (see load_hardware)")
        value = gpu[key]
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"gpu[{key!r}] must be a number, got {value!r}")
        if not math.isfinite(value) or value <= 0:
            raise ValueError(f"gpu[{key!r}] must be a positive number, got {value!r}")


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


# %% nbgrader={"grade": false, "grade_id": "validate_config", "locked": false, "schema_version": 3, "solution": true, "task": false}
def validate_config(cfg):
    """Raise ValueError (naming the offending key) unless `cfg` is a valid model config.

    Returns None. Accepts the keys in CONFIG_KEYS (all required) and OPTIONAL_CONFIG_KEYS.
    A wrong type (cfg not a dict, a non-int size, a non-bool tied_embeddings, a non-str name)
    raises TypeError instead.
    """
    ### BEGIN SOLUTION
    if not isinstance(cfg, dict):
        raise TypeError(f"a model config must be a dict, got {type(cfg).__name__}")
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
        raise TypeError(
            f"config key 'tied_embeddings' must be True or False, got {cfg['tied_embeddings']!r}"
        )
    if "name" in cfg and not isinstance(cfg["name"], str):
        raise TypeError(f"config key 'name' must be a str, got {cfg['name']!r}")
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
    try:
        validate_config(broken)
    except error:
        pass
    except (TypeError, ValueError) as exc:
        raise AssertionError(
            f"validate_config({broken}) raised {type(exc).__name__}; expected {error.__name__}"
        ) from None
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
    RMSNorm gain, and the output head unless `tied_embeddings` is True. Raises TypeError or
    ValueError for an invalid config (see validate_config).
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


# %% nbgrader={"grade": false, "grade_id": "matmul_params", "locked": false, "schema_version": 3, "solution": true, "task": false}
def matmul_params(cfg):
    """Number of weights (an int) a decode step reads and multiplies: num_params(cfg), less the
    input embedding table (vocab_size * dim) when tied_embeddings is False.

    Raises TypeError or ValueError for an invalid config (see validate_config).
    """
    ### BEGIN SOLUTION
    validate_config(cfg)
    lookup_only = 0 if cfg["tied_embeddings"] else cfg["vocab_size"] * cfg["dim"]
    return int(num_params(cfg) - lookup_only)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_matmul_params", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
self_check(
    matmul_params(COURSE_MODEL) == num_params(COURSE_MODEL),
    "tied embeddings: the output head multiplies the whole table, so every weight counts",
)
self_check(
    matmul_params(LLAMA3_8B) == num_params(LLAMA3_8B) - 128256 * 4096,
    f"untied: the input table is a lookup; got {matmul_params(LLAMA3_8B):,}",
)
self_check(type(matmul_params(LLAMA3_8B)) is int, "matmul_params returns a Python int")
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
# (the leading 2 is "K and V"; `dtype_bytes` is 2 for fp16/bf16). Grouped-query attention exists
# precisely to shrink this number: Llama-3-8B has 32 query heads but caches only 8 K/V heads.
#
# At every decode step the attention of the new token reads the whole cache, so a sequence with
# `context_len` tokens costs `context_len x KV bytes per token` of extra DRAM traffic per step.


# %% nbgrader={"grade": false, "grade_id": "kv_bytes_per_token", "locked": false, "schema_version": 3, "solution": true, "task": false}
def kv_bytes_per_token(cfg, dtype_bytes=2):
    """Bytes (an int) of K and V cached for one token, summed over all layers and K/V heads.

    `dtype_bytes` is the size of one cached number in bytes (2 for fp16/bf16) and must be a
    positive int. Raises TypeError or ValueError for an invalid config or dtype_bytes.
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
for _bad, _error in ((0, ValueError), (-2, ValueError), (2.0, TypeError), (True, TypeError)):
    try:
        kv_bytes_per_token(COURSE_MODEL, dtype_bytes=_bad)
    except _error:
        pass
    else:
        raise AssertionError(f"dtype_bytes={_bad!r} should raise {_error.__name__}")
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


# %% nbgrader={"grade": false, "grade_id": "decode_intensity", "locked": false, "schema_version": 3, "solution": true, "task": false}
def decode_intensity(cfg, batch, context_len, dtype_bytes=2):
    """Arithmetic intensity (FLOP/byte, a float) of one decode step.

    With P = matmul_params(cfg): FLOPs = 2 * P * batch; bytes = P * dtype_bytes
    + batch * context_len * kv_bytes_per_token(cfg, dtype_bytes).
    `batch` is the number of sequences decoded together (an int >= 1), `context_len` the number of
    tokens already in each sequence's KV cache (an int >= 0; 0 means no KV traffic), `dtype_bytes`
    the bytes per weight and per cached number (a positive int). Raises TypeError for a wrong
    type, ValueError for a value out of range.
    """
    ### BEGIN SOLUTION
    batch = check_int(batch, "batch", 1)
    context_len = check_int(context_len, "context_len", 0)
    kv = kv_bytes_per_token(cfg, dtype_bytes)  # validates cfg and dtype_bytes
    params = matmul_params(cfg)
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
# Llama-3-8B multiplies 7.5e9 weights (its input table is a lookup): 15.0 GB of fp16 per step.
self_check(
    decode_intensity(LLAMA3_8B, 1, 0) == 1.0, "no cache, fp16, batch 1: 1 FLOP/byte, tied or not"
)
for _args, _error in (((0, 16), ValueError), ((1, -1), ValueError), ((1.5, 16), TypeError)):
    try:
        decode_intensity(COURSE_MODEL, *_args)
    except _error:
        pass
    else:
        raise AssertionError(f"decode_intensity(cfg, *{_args}) should raise {_error.__name__}")
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
# **The datasheet ridge is not the one you meet.** The 65 TFLOP/s are a peak the T4 cannot hold
# under its 70 W power cap: on long fp16 GEMMs it sustains about 24 TFLOP/s (course.toml keeps
# that figure as `sustained_fp16_tflops`, for the plot of section 12), and its GDDR6 about
# 240 GB/s (three quarters of 320). The *practical* ridge is then about
# $24 \times 10^{12} / 240 \times 10^{9} = 100$ FLOP/byte (75 against the datasheet bandwidth):
# half the datasheet's. Everything graded here uses the datasheet ridge, as `course.toml` gives
# it, because that is the number both you and the grader can compute; when you read a crossover
# batch, remember that a real T4 turns compute-bound at roughly half of it.
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


# %% nbgrader={"grade": false, "grade_id": "crossover_batch", "locked": false, "schema_version": 3, "solution": true, "task": false}
def crossover_batch(cfg, ridge, context_len, dtype_bytes=2):
    """Smallest batch (an int >= 1) whose decode intensity is >= `ridge`, or None if none is.

    `ridge` is the GPU's ridge point in FLOP/byte (a positive number), `context_len` the tokens
    in each sequence's KV cache (an int >= 0; with 0 there is no KV traffic and a crossover always
    exists). Returns None when the intensity's limit 2*matmul_params / (context_len * KV bytes per
    token) is <= ridge. The result agrees with decode_intensity: intensity(b) >= ridge and, for
    b > 1, intensity(b - 1) < ridge. Raises TypeError when ridge is not a real number (a bool is
    not), ValueError when it is not finite and positive, and as decode_intensity otherwise.
    """
    ### BEGIN SOLUTION
    if isinstance(ridge, bool) or not isinstance(ridge, numbers.Real):
        raise TypeError(f"ridge must be a number of FLOP/byte, got {ridge!r}")
    if not math.isfinite(ridge) or ridge <= 0:
        raise ValueError(f"ridge must be a finite number > 0 FLOP/byte, got {ridge}")
    context_len = check_int(context_len, "context_len", 0)
    kv = kv_bytes_per_token(cfg, dtype_bytes)  # validates cfg and dtype_bytes
    params = matmul_params(cfg)
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
assert _b is not None and 2000 < _b < 2500, f"Llama-3-8B at 512 tokens crosses near 2,200: {_b}"
assert decode_intensity(LLAMA3_8B, _b, 512) >= 203.125 > decode_intensity(LLAMA3_8B, _b - 1, 512), (
    "the crossover must agree with decode_intensity: b reaches the ridge, b - 1 does not"
)
assert crossover_batch(LLAMA3_8B, 203.125, 8192) is None, "at 8192 tokens no batch gets there"
# The course model's KV cache grows as fast as its FLOPs: no batch gets there at 512 tokens.
assert crossover_batch(COURSE_MODEL, 203.125, CONTEXT_LEN) is None, (
    "the course model's ceiling at 512 tokens is about 5 FLOP/byte: the answer is None"
)
for _ridge, _error in ((0, ValueError), (-1.0, ValueError), ("203", TypeError)):
    try:
        crossover_batch(COURSE_MODEL, _ridge, CONTEXT_LEN)
    except _error:
        pass
    else:
        raise AssertionError(f"ridge={_ridge!r} should raise {_error.__name__}")
print("crossover_batch: self-checks passed")

# %% [markdown]
# ## 6. Read the hardware table from `course.toml`
#
# The peak figures of the course GPUs are kept in exactly one place, the `[hardware.<name>]` tables
# of `course.toml` at the repository root, in the units vendors quote: `fp16_tensor_tflops`
# (TFLOP/s), `bandwidth_gbs` (GB/s) and `memory_gb` (GB of device memory, 1 GB = 1e9 bytes).
# Typing them into a notebook by hand is how two numbers that should agree end up disagreeing,
# so read them instead (the copy in the first cell is generated from `course.toml` by the
# release, never typed), and convert to plain SI units (FLOP/s and byte/s) once, at the boundary.
#
# Where the tables come from is settled for you: the first line of `load_hardware` calls the
# provided `hardware_tables(path)`, which reads `course.toml` (found by walking up from the
# current directory unless you give a path; `FileNotFoundError` when the file you name does not
# exist) or, in a notebook opened on its own, the copy the release wrote into the first cell from
# that same file. It returns the tables as `tomllib` parses them, a dict such as
# `{"T4": {"fp16_tensor_tflops": 65.0, ...}, ...}`, and a `source` string naming where they came
# from, for your error messages.
#
# Your part is the boundary: turn those tables into one dict per GPU with exactly four keys:
# `{"name": <short name>, "peak_flops": ..., "peak_bandwidth": ..., "memory_bytes": ...}`
# (FLOP/s, byte/s, bytes; the short name is the table's key, such as `"T4"`). When there are no
# tables, or a table lacks one of the three figures or has one that is not a positive number,
# raise `ValueError` naming the table and the key (what a file holds is data, not an argument, so
# a figure of the wrong type there is a `ValueError` too).


# %% nbgrader={"grade": false, "grade_id": "load_hardware", "locked": false, "schema_version": 3, "solution": true, "task": false}
def load_hardware(path=None):
    """Read the [hardware.*] tables of course.toml into {short_name: gpu dict}.

    Each gpu dict is {"name": short_name, "peak_flops": FLOP/s (fp16 tensor), "peak_bandwidth":
    byte/s, "memory_bytes": bytes}. `path` is course.toml or the folder holding it; by default it
    is found by walking up from the current directory (see hardware_tables). Raises
    FileNotFoundError when there is no course.toml, ValueError when there are no tables or an
    entry lacks a figure or has a non-positive one.
    """
    table, source = hardware_tables(path)  # course.toml's [hardware], or the notebook's copy
    ### BEGIN SOLUTION
    if not isinstance(table, dict) or not table:
        raise ValueError(f"{source} has no [hardware.<name>] tables")
    hardware = {}
    for short_name, entry in table.items():
        figures = {}
        for key in ("fp16_tensor_tflops", "bandwidth_gbs", "memory_gb"):
            value = entry.get(key) if isinstance(entry, dict) else None
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
                raise ValueError(
                    f"[hardware.{short_name}] in {source} needs a positive number for {key!r}, "
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


# %% nbgrader={"grade": false, "grade_id": "m9_record", "locked": false, "schema_version": 3, "solution": true, "task": false}
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
    ### BEGIN SOLUTION
    validate_config(cfg)
    check_gpu(gpu, ("peak_flops", "peak_bandwidth"))
    if not isinstance(gpu.get("name"), str):
        raise TypeError(f"gpu['name'] must be a str, got {gpu.get('name')!r}")
    if not gpu["name"]:
        raise ValueError("gpu['name'] must not be empty")
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
        ceiling = 2 * matmul_params(cfg) / (context_len * kv_bytes_per_token(cfg, dtype_bytes))
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
assert says_bandwidth_bound(_line), (
    f"batch 1 is below the ridge, so the conclusion calls it bandwidth-bound: {_line!r}"
)
for _text, _want in (
    ("At batch 1 decode is memory bound", True),
    ("batch-1 decode is bandwidth-bound, not compute-bound", True),
    ("batch 1 is compute-bound, not memory-bound", False),
    ("batch 1 isn't really bandwidth-bound", False),
    ("batch 1 is limited by memory", False),
):
    self_check(says_bandwidth_bound(_text) is _want, f"says_bandwidth_bound({_text!r}) is {_want}")
_ = json.dumps(_rec, allow_nan=False)  # plain JSON data, ready for metrics.json
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
# step). No kernel beats this bound, and real ones reach some fraction of it.
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
# sequence's KV cache have to be on the GPU at once,
#
# $$\text{num\_params} \cdot \text{dtype\_bytes} + \text{batch} \cdot \text{context\_len} \cdot
# \text{KV} \le \text{memory\_bytes}.$$
#
# A crossover batch that does not fit is not a batch you can run. (The bound counts no
# activations, no workspace and no CUDA context, so a `True` here is necessary, not sufficient.)
#
# **Exercise.** Write `decode_tokens_per_s_bound(cfg, gpu, batch, context_len, dtype_bytes=2,
# kv_dtype_bytes=None)`, which returns the ceiling above as a Python `float` in tokens per second
# (for the whole batch, not per sequence), and `kv_cache_fits(cfg, gpu, batch, context_len,
# dtype_bytes=2, kv_dtype_bytes=None)`, which returns a Python `bool`: `True` when the weights
# plus the batch's KV cache take at most `gpu["memory_bytes"]` bytes (exactly equal counts as
# fitting). `gpu` is a dict as returned by `load_hardware`: the first function needs its
# `peak_flops` and `peak_bandwidth`, the second its `memory_bytes`; a missing or non-positive
# figure raises `ValueError` and a figure that is not a number `TypeError` (`check_gpu` does
# both). `batch` is an int >= 1, `context_len` an int >= 0, `dtype_bytes` and `kv_dtype_bytes`
# (when given) positive ints, as in `decode_intensity`.


# %% nbgrader={"grade": false, "grade_id": "decode_tokens_per_s_bound", "locked": false, "schema_version": 3, "solution": true, "task": false}
def decode_tokens_per_s_bound(cfg, gpu, batch, context_len, dtype_bytes=2, kv_dtype_bytes=None):
    """Roofline ceiling on the batch's decode rate, tokens/s (a float): the lower of both roofs.

    batch / max(step bytes / gpu["peak_bandwidth"], 2 * matmul_params * batch / gpu["peak_flops"])
    with step bytes = matmul_params * dtype_bytes + batch * context_len *
    kv_bytes_per_token(cfg, kv_dtype_bytes); kv_dtype_bytes=None means dtype_bytes.
    Raises TypeError or ValueError for an invalid config, gpu dict or argument.
    """
    ### BEGIN SOLUTION
    check_gpu(gpu, ("peak_flops", "peak_bandwidth"))
    batch = check_int(batch, "batch", 1)
    context_len = check_int(context_len, "context_len", 0)
    dtype_bytes = check_int(dtype_bytes, "dtype_bytes", 1)
    kv_dtype = dtype_bytes if kv_dtype_bytes is None else kv_dtype_bytes
    kv = kv_bytes_per_token(cfg, kv_dtype)  # validates cfg and kv_dtype_bytes
    params = matmul_params(cfg)
    step_bytes = params * dtype_bytes + batch * context_len * kv
    step_s = max(step_bytes / gpu["peak_bandwidth"], 2 * params * batch / gpu["peak_flops"])
    return float(batch / step_s)
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "kv_cache_fits", "locked": false, "schema_version": 3, "solution": true, "task": false}
def kv_cache_fits(cfg, gpu, batch, context_len, dtype_bytes=2, kv_dtype_bytes=None):
    """True when the weights and `batch` sequences' KV caches fit in gpu["memory_bytes"].

    Compares num_params * dtype_bytes + batch * context_len * kv_bytes_per_token(cfg,
    kv_dtype_bytes) with the memory (equal fits; kv_dtype_bytes=None means dtype_bytes). Returns
    a Python bool; raises TypeError or ValueError for invalid inputs.
    """
    ### BEGIN SOLUTION
    check_gpu(gpu, ("memory_bytes",))
    batch = check_int(batch, "batch", 1)
    context_len = check_int(context_len, "context_len", 0)
    dtype_bytes = check_int(dtype_bytes, "dtype_bytes", 1)
    kv_dtype = dtype_bytes if kv_dtype_bytes is None else kv_dtype_bytes
    kv = kv_bytes_per_token(cfg, kv_dtype)
    needed = num_params(cfg) * dtype_bytes + batch * context_len * kv
    return bool(needed <= gpu["memory_bytes"])
    ### END SOLUTION


# %% [markdown]
# The same inequality, solved for the batch, gives the **memory-capacity wall**: the largest
# batch whose caches fit beside the weights,
#
# $$b_\text{max} = \left\lfloor \frac{\text{memory\_bytes} - \text{num\_params} \cdot
# \text{weight\_bytes}}{\text{context\_len} \cdot \text{KV elements per token} \cdot
# \text{kv\_bytes}} \right\rfloor,$$
#
# or 0 when the weights alone do not fit. Here the precisions are bytes per number that may be
# fractional, so that 4-bit weights are `weight_bytes=0.5`; the KV elements per token are
# `kv_bytes_per_token(cfg, 1)` (one byte per number gives the count). Llama-3-8B in fp16 does not
# fit on a T4 at all (16.06 GB of weights in 16 GB); with 4-bit weights (4.0 GB) and an 8-bit
# cache it does, with room for a few hundred 512-token sequences.
#
# **Exercise.** Write `max_batch_that_fits(cfg, gpu, context_len, weight_bytes=2, kv_bytes=2)`:
# the Python `int` above (0 when even the weights do not fit). `context_len` is an int >= 1 (with
# no cache the batch has no memory limit here); `weight_bytes` and `kv_bytes` are positive
# numbers (`check_bytes`); `gpu` needs `memory_bytes`. Compute it exactly: a float division can
# land a hair under an integer and lose a whole sequence, so the grader checks that your batch
# fits and one more does not (`fractions.Fraction` of each figure is exact).


# %% nbgrader={"grade": false, "grade_id": "max_batch_that_fits", "locked": false, "schema_version": 3, "solution": true, "task": false}
def max_batch_that_fits(cfg, gpu, context_len, weight_bytes=2, kv_bytes=2):
    """Largest batch (an int >= 0) whose KV caches of `context_len` tokens fit in
    gpu["memory_bytes"] beside all num_params(cfg) weights; 0 when the weights alone do not.

    weight_bytes and kv_bytes are bytes per number (positive ints or floats: 0.5 is 4-bit).
    Raises TypeError or ValueError for invalid inputs (context_len must be an int >= 1).
    """
    ### BEGIN SOLUTION
    check_gpu(gpu, ("memory_bytes",))
    context_len = check_int(context_len, "context_len", 1)
    weight_bytes = check_bytes(weight_bytes, "weight_bytes")
    kv_bytes = check_bytes(kv_bytes, "kv_bytes")
    per_sequence = context_len * kv_bytes_per_token(cfg, 1) * Fraction(kv_bytes)
    room = Fraction(gpu["memory_bytes"]) - num_params(cfg) * Fraction(weight_bytes)
    return 0 if room < 0 else int(room // per_sequence)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_serving", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_t4_like = {"name": "T4", "peak_flops": 65e12, "peak_bandwidth": 320e9, "memory_bytes": 16e9}
_rate = decode_tokens_per_s_bound(COURSE_MODEL, _t4_like, 1, 0)
self_check(type(_rate) is float, f"decode_tokens_per_s_bound must return a float, got {_rate!r}")
self_check(
    abs(_rate - 320e9 / (2 * matmul_params(COURSE_MODEL))) < 1e-6 * _rate,
    f"batch 1, no cache: bandwidth / weight bytes = "
    f"{320e9 / (2 * matmul_params(COURSE_MODEL)):.6g} tokens/s, got {_rate!r}",
)
_llama_rate = decode_tokens_per_s_bound(LLAMA3_8B, _t4_like, 1, 0)
self_check(21 < _llama_rate < 21.5, f"Llama-3-8B on a T4: about 21.3 tokens/s, got {_llama_rate!r}")
# Past the crossover the compute roof binds: without a cache, batch 1000 > ridge 203.
_compute = decode_tokens_per_s_bound(COURSE_MODEL, _t4_like, 1000, 0)
self_check(
    abs(_compute - 65e12 / (2 * matmul_params(COURSE_MODEL))) < 1e-6 * _compute,
    f"batch 1000, no cache: the compute roof, peak_flops / (2 * matmul params); got {_compute!r}",
)
self_check(
    decode_tokens_per_s_bound(COURSE_MODEL, _t4_like, 8, CONTEXT_LEN)
    > decode_tokens_per_s_bound(COURSE_MODEL, _t4_like, 1, CONTEXT_LEN),
    "a bigger batch shares the weight reads: the ceiling rises",
)
self_check(
    decode_tokens_per_s_bound(COURSE_MODEL, _t4_like, 8, CONTEXT_LEN, 2, 1)
    > decode_tokens_per_s_bound(COURSE_MODEL, _t4_like, 8, CONTEXT_LEN),
    "an 8-bit cache moves half the KV bytes: the ceiling rises",
)
self_check(kv_cache_fits(COURSE_MODEL, _t4_like, 32, CONTEXT_LEN) is True, "the course model fits")
self_check(
    kv_cache_fits(LLAMA3_8B, _t4_like, 1, CONTEXT_LEN) is False,
    "Llama-3-8B's 16.06 GB of fp16 weights alone exceed a 16 GB T4",
)
_exact = {**_t4_like, "memory_bytes": 2 * num_params(COURSE_MODEL) + 512 * 1024}
self_check(kv_cache_fits(COURSE_MODEL, _exact, 1, 512) is True, "exactly full still fits")
self_check(kv_cache_fits(COURSE_MODEL, _exact, 1, 512, 2, 1) is True, "an 8-bit cache fits too")
self_check(max_batch_that_fits(COURSE_MODEL, _exact, 512) == 1, "exactly one sequence fits")
self_check(max_batch_that_fits(LLAMA3_8B, _t4_like, 512) == 0, "fp16 Llama-3-8B: no batch fits")
_int4 = max_batch_that_fits(LLAMA3_8B, _t4_like, 512, weight_bytes=0.5, kv_bytes=1)
self_check(300 < _int4 < 400, f"4-bit Llama-3-8B, 8-bit cache, 512 tokens: about 357, got {_int4}")
for _call, _error in (
    (lambda: decode_tokens_per_s_bound(COURSE_MODEL, {"peak_bandwidth": 0.0}, 1, 0), ValueError),
    (lambda: decode_tokens_per_s_bound(COURSE_MODEL, _t4_like, 0, 0), ValueError),
    (lambda: decode_tokens_per_s_bound(COURSE_MODEL, _t4_like, True, 0), TypeError),
    (lambda: kv_cache_fits(COURSE_MODEL, {"name": "T4"}, 1, 0), ValueError),
    (lambda: kv_cache_fits(COURSE_MODEL, _t4_like, 1, -1), ValueError),
    (lambda: kv_cache_fits(COURSE_MODEL, "T4", 1, 0), TypeError),
    (lambda: max_batch_that_fits(COURSE_MODEL, _t4_like, 0), ValueError),
    (lambda: max_batch_that_fits(COURSE_MODEL, _t4_like, 512, weight_bytes="2"), TypeError),
):
    try:
        _call()
    except _error:
        pass
    else:
        raise AssertionError(f"a bad gpu dict, batch or context_len must raise {_error.__name__}")
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
# * write with sorted keys and an indent of 2, so diffs between commits stay readable.


# %% nbgrader={"grade": false, "grade_id": "save_metric", "locked": false, "schema_version": 3, "solution": true, "task": false}
def save_metric(path, key, value):
    """Set metrics[key] = value in the JSON file at `path`, keeping every other key.

    `path` is a str or a pathlib.Path (TypeError otherwise). `key` is a non-empty str (TypeError
    for a non-str, ValueError for ""); `value` must be plain JSON data (TypeError otherwise) with
    no NaN or infinity (ValueError). A missing or empty file counts as {}; a file that is not a
    JSON object raises ValueError naming it. The file is replaced atomically (temp file +
    os.replace) and written with sorted keys and indent 2. Returns None.
    """
    ### BEGIN SOLUTION
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or a pathlib.Path, got {type(path).__name__}")
    path = Path(path)  # grader: public
    if not isinstance(key, str):
        raise TypeError(f"the metrics key must be a str, got {key!r}")
    if not key:
        raise ValueError("the metrics key must not be empty")
    try:
        encoded = json.dumps(value, allow_nan=False, sort_keys=True)
    except TypeError as exc:  # grader: public
        raise TypeError(
            f"metrics[{key!r}] must be plain JSON data (dict with str keys, list, str, int, float, "
            f"bool, None): {exc}"
        ) from None
    except ValueError as exc:
        raise ValueError(f"metrics[{key!r}] must hold no NaN or infinity: {exc}") from None

    data = {}
    if path.exists():
        text = path.read_text(encoding="utf-8")  # grader: public
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
    for _bad, _error in ((float("nan"), ValueError), ({"x": float("inf")}, ValueError),
                         (object(), TypeError), ({1, 2}, TypeError)):
        try:
            save_metric(_path, "bad", _bad)
        except _error:
            pass
        else:
            raise AssertionError(f"save_metric({_bad!r}) should raise {_error.__name__}")
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
# ## 10. One decode step, kernel by kernel
#
# Sections 4 and 5 treated a decode step as one blob of FLOPs and bytes. A GPU does not run
# blobs; it runs kernels, one after another, and each kernel sits on the roofline by its own
# intensity. A decode step has two kinds that behave in opposite ways:
#
# * **The weight matmuls** (wq, wk, wv, wo, w1, w2, w3, the output head): they read the $P$
#   weights once for the whole batch and do $2 P$ FLOPs per sequence,
#   $$I_\text{weights} = \frac{2 \cdot P \cdot \text{batch}}{P \cdot \text{weight\_bytes}}
#   = \frac{2 \cdot \text{batch}}{\text{weight\_bytes}}.$$
#   Their intensity grows with the batch and turns compute-bound at
#   $\text{batch} \ge \text{ridge} \cdot \text{weight\_bytes} / 2$: 204 sequences in fp16 on the
#   T4 (ridge 203.1), 296 on the H100 (ridge 295.2), whatever the model. Against the T4's
#   practical ridge of about 100 (section 5), a real T4 gets there near batch 100.
# * **Attention over the cache**: each sequence reads its own cache and does
#   $4 \cdot n_\text{layers} \cdot \text{dim} \cdot \text{context}$ FLOPs with it (section 4), so
#   $$I_\text{attention} = \frac{4 \cdot n_\text{layers} \cdot \text{dim} \cdot \text{context}}
#   {\text{context} \cdot 2 \cdot n_\text{layers} \cdot n_\text{kv\_heads} \cdot \text{head\_dim}
#   \cdot \text{kv\_bytes}} = \frac{2}{\text{kv\_bytes}} \cdot \frac{n_\text{heads}}
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
# **Exercise.** Write `decode_step_breakdown(cfg, batch, context, gpu, weight_bytes=2,
# kv_bytes=2)`. It returns a dict with three keys: `"weights"` and `"attention"`, each a dict
# with the keys `flops`, `bytes`, `intensity` (FLOP/byte), `time_s` (seconds: the kernel's
# roofline time) and `bound` (the string `"compute"` when its intensity is at or above the ridge
# `peak_flops / peak_bandwidth`, else `"memory"`), and `"time_s"`, the sum of the two kernels'
# times. Every number is a Python `float`. With $P$ = `matmul_params(cfg)` and
# $E$ = `kv_bytes_per_token(cfg, 1)` (the cached numbers per token):
#
# | kernel | FLOPs | bytes |
# |---|---|---|
# | weights | $2 \cdot P \cdot \text{batch}$ | $P \cdot \text{weight\_bytes}$ |
# | attention | $4 \cdot n_\text{layers} \cdot \text{dim} \cdot \text{context} \cdot \text{batch}$ | $\text{batch} \cdot \text{context} \cdot E \cdot \text{kv\_bytes}$ |
#
# `batch` and `context` (the tokens in each sequence's cache) are ints >= 1; `weight_bytes` and
# `kv_bytes` are bytes per number, positive ints or floats (`check_bytes`); `gpu` needs
# `peak_flops` and `peak_bandwidth`.


# %% nbgrader={"grade": false, "grade_id": "roofline_kernel", "locked": false, "schema_version": 3, "solution": true, "task": false}
def roofline_kernel(flops, nbytes, gpu):
    """One kernel on the roofline: its FLOPs, bytes, intensity, time (s) and binding roof.

    A helper for decode_step_breakdown and prefill_time (not graded on its own): `flops` and
    `nbytes` are positive numbers, `gpu` a checked gpu dict.
    """
    ### BEGIN SOLUTION
    memory_s = nbytes / gpu["peak_bandwidth"]
    compute_s = flops / gpu["peak_flops"]
    intensity = flops / nbytes
    at_or_past_ridge = intensity * gpu["peak_bandwidth"] >= gpu["peak_flops"]
    return {
        "flops": float(flops),
        "bytes": float(nbytes),
        "intensity": float(intensity),
        "time_s": float(max(memory_s, compute_s)),
        "bound": "compute" if at_or_past_ridge else "memory",
    }
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "decode_step_breakdown", "locked": false, "schema_version": 3, "solution": true, "task": false}
def decode_step_breakdown(cfg, batch, context, gpu, weight_bytes=2, kv_bytes=2):
    """One decode step split into its weight matmuls and its attention over the KV cache.

    Returns {"weights": kernel, "attention": kernel, "time_s": the two kernels' times summed},
    each kernel {"flops", "bytes", "intensity", "time_s", "bound"} (floats; bound "compute" or
    "memory"). Raises TypeError or ValueError for invalid inputs.
    """
    ### BEGIN SOLUTION
    check_gpu(gpu, ("peak_flops", "peak_bandwidth"))
    batch = check_int(batch, "batch", 1)
    context = check_int(context, "context", 1)
    weight_bytes = check_bytes(weight_bytes, "weight_bytes")
    kv_bytes = check_bytes(kv_bytes, "kv_bytes")
    params = matmul_params(cfg)  # validates cfg
    per_token = kv_bytes_per_token(cfg, 1)
    weights = roofline_kernel(2 * params * batch, params * weight_bytes, gpu)
    attention = roofline_kernel(
        4 * cfg["n_layers"] * cfg["dim"] * context * batch,
        batch * context * per_token * kv_bytes,
        gpu,
    )
    return {
        "weights": weights,
        "attention": attention,
        "time_s": float(weights["time_s"] + attention["time_s"]),
    }
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_decode_step_breakdown", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_t4_like = {"name": "T4", "peak_flops": 65e12, "peak_bandwidth": 320e9, "memory_bytes": 16e9}
_step = decode_step_breakdown(COURSE_MODEL, 1, CONTEXT_LEN, _t4_like)
self_check(set(_step) == {"weights", "attention", "time_s"}, f"three keys, got {sorted(_step)}")
self_check(
    _step["weights"]["intensity"] == 1.0 and _step["weights"]["bound"] == "memory",
    f"fp16 weights at batch 1: 1 FLOP/byte, memory-bound; got {_step['weights']}",
)
self_check(
    _step["attention"]["intensity"] == 2.0,
    f"attention: n_heads / n_kv_heads = 2 FLOP/byte in fp16; got {_step['attention']}",
)
self_check(
    decode_step_breakdown(COURSE_MODEL, 256, CONTEXT_LEN, _t4_like)["attention"]["intensity"]
    == 2.0,
    "batching does not change attention's intensity",
)
_big = decode_step_breakdown(COURSE_MODEL, 204, CONTEXT_LEN, _t4_like)
self_check(
    _big["weights"]["bound"] == "compute" and _big["attention"]["bound"] == "memory",
    "batch 204 > ridge 203.1: the weights turn compute-bound, attention never does",
)
self_check(
    decode_step_breakdown(COURSE_MODEL, 203, CONTEXT_LEN, _t4_like)["weights"]["bound"]
    == "memory",
    "batch 203 is still just under the ridge",
)
self_check(
    abs(_step["time_s"] - (_step["weights"]["time_s"] + _step["attention"]["time_s"])) < 1e-15,
    "the step's time is the sum of its kernels' times",
)
_mixed = decode_step_breakdown(LLAMA3_8B, 1, CONTEXT_LEN, _t4_like, weight_bytes=0.5, kv_bytes=1)
self_check(
    _mixed["weights"]["bytes"] == 0.5 * matmul_params(LLAMA3_8B)
    and _mixed["attention"]["bytes"] == CONTEXT_LEN * kv_bytes_per_token(LLAMA3_8B, 1),
    "4-bit weights and an 8-bit cache: each term uses its own precision",
)
for _call, _error in (
    (lambda: decode_step_breakdown(COURSE_MODEL, 1, 0, _t4_like), ValueError),
    (lambda: decode_step_breakdown(COURSE_MODEL, 1, 16, _t4_like, kv_bytes=0), ValueError),
    (lambda: decode_step_breakdown(COURSE_MODEL, 1, 16, _t4_like, weight_bytes=True), TypeError),
    (lambda: decode_step_breakdown(COURSE_MODEL, 2.0, 16, _t4_like), TypeError),
):
    try:
        _call()
    except _error:
        pass
    else:
        raise AssertionError(f"decode_step_breakdown must raise {_error.__name__} here")
print("decode_step_breakdown: self-checks passed")

# %% [markdown]
# ## 11. Prefill against decode: time to first token, time per output token
#
# Before the first new token, the model reads the whole prompt: **prefill**. Every prompt token
# goes through the weights in the same pass, so prefill is a fat matmul, not a skinny one. For a
# batch of prompts of `prompt_len` tokens:
#
# * the weights are read once and do $2 \cdot P \cdot \text{batch} \cdot \text{prompt\_len}$
#   FLOPs: intensity $2 \cdot \text{batch} \cdot \text{prompt\_len} / \text{weight\_bytes}$,
#   compute-bound on a T4 in fp16 from a 204-token prompt on;
# * attention is causal: token $i$ (counting from 1) attends to the $i$ tokens up to and
#   including itself, $4 \cdot n_\text{layers} \cdot \text{dim} \cdot i$ FLOPs, so a prompt costs
#   $4 \cdot n_\text{layers} \cdot \text{dim} \cdot \sum_{i=1}^{n} i = 2 \cdot n_\text{layers}
#   \cdot \text{dim} \cdot n (n + 1)$ FLOPs per sequence. Its bytes are the KV cache it **writes**
#   for the decode steps that follow: $\text{batch} \cdot \text{prompt\_len} \cdot E \cdot
#   \text{kv\_bytes}$. (A fused attention kernel keeps the prompt's own K and V on chip; we count
#   only the cache written to DRAM, and no activations.)
#
# Prefill takes the two kernels' roofline times summed, like a decode step. Two numbers then
# describe what a user feels:
#
# * **TTFT**, the time to first token, is the prefill time;
# * **TPOT**, the time per output token, is the time of one decode step with the prompt in the
#   cache (`decode_step_breakdown(cfg, batch, prompt_len, ...)["time_s"]`).
#
# For Llama-3-8B on an H100 with a 512-token prompt, prefill does about 512 times the FLOPs of a
# decode step on the same bytes of weights, yet takes less than twice as long (about 7.8 ms
# against 4.5 ms), because it is compute-bound while decode waits on memory. That asymmetry is why serving systems schedule
# prefills and decodes differently (chunked prefill, and separate prefill and decode GPUs).
#
# **Exercise.** Write `prefill_time(cfg, batch, prompt_len, gpu, weight_bytes=2, kv_bytes=2)`,
# the prefill's time in seconds (a Python `float`), and `ttft_and_tpot(cfg, batch, prompt_len,
# gpu, weight_bytes=2, kv_bytes=2)`, which returns the tuple `(ttft_s, tpot_s)` of two Python
# floats. `batch` and `prompt_len` are ints >= 1; the rest is checked as in
# `decode_step_breakdown`.


# %% nbgrader={"grade": false, "grade_id": "prefill_time", "locked": false, "schema_version": 3, "solution": true, "task": false}
def prefill_time(cfg, batch, prompt_len, gpu, weight_bytes=2, kv_bytes=2):
    """Seconds (a float) to prefill `batch` prompts of `prompt_len` tokens: the weight matmuls'
    and the causal attention's roofline times summed (attention's bytes: the KV cache written).

    Raises TypeError or ValueError for invalid inputs.
    """
    ### BEGIN SOLUTION
    check_gpu(gpu, ("peak_flops", "peak_bandwidth"))
    batch = check_int(batch, "batch", 1)
    n = check_int(prompt_len, "prompt_len", 1)
    weight_bytes = check_bytes(weight_bytes, "weight_bytes")
    kv_bytes = check_bytes(kv_bytes, "kv_bytes")
    params = matmul_params(cfg)  # validates cfg
    weights = roofline_kernel(2 * params * batch * n, params * weight_bytes, gpu)
    attention = roofline_kernel(
        batch * 2 * cfg["n_layers"] * cfg["dim"] * n * (n + 1),
        batch * n * kv_bytes_per_token(cfg, 1) * kv_bytes,
        gpu,
    )
    return float(weights["time_s"] + attention["time_s"])
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "ttft_and_tpot", "locked": false, "schema_version": 3, "solution": true, "task": false}
def ttft_and_tpot(cfg, batch, prompt_len, gpu, weight_bytes=2, kv_bytes=2):
    """(time to first token, time per output token) in seconds, a tuple of two floats: the
    prefill of the prompts, then one decode step with the prompt_len tokens in the cache."""
    ### BEGIN SOLUTION
    ttft = prefill_time(cfg, batch, prompt_len, gpu, weight_bytes, kv_bytes)
    step = decode_step_breakdown(cfg, batch, prompt_len, gpu, weight_bytes, kv_bytes)
    return (float(ttft), float(step["time_s"]))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "check_prefill", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_t4_like = {"name": "T4", "peak_flops": 65e12, "peak_bandwidth": 320e9, "memory_bytes": 16e9}
# A one-token prompt is memory-bound: the weights' bytes plus the one token's cache entry.
_one = prefill_time(COURSE_MODEL, 1, 1, _t4_like)
_want = (2 * matmul_params(COURSE_MODEL) + kv_bytes_per_token(COURSE_MODEL)) / 320e9
self_check(abs(_one - _want) < 1e-9 * _want, f"a 1-token prefill takes {_want:.4g} s, got {_one!r}")
_ttft, _tpot = ttft_and_tpot(LLAMA3_8B, 1, CONTEXT_LEN, _t4_like)
self_check(type(_ttft) is float and type(_tpot) is float, "ttft_and_tpot returns two floats")
self_check(
    _tpot == decode_step_breakdown(LLAMA3_8B, 1, CONTEXT_LEN, _t4_like)["time_s"],
    "TPOT is one decode step with the prompt in the cache",
)
self_check(_ttft > _tpot, "prefilling 512 tokens takes longer than decoding one")
self_check(
    prefill_time(LLAMA3_8B, 1, CONTEXT_LEN, _t4_like)
    < CONTEXT_LEN * decode_step_breakdown(LLAMA3_8B, 1, CONTEXT_LEN, _t4_like)["time_s"],
    "one prefill of 512 tokens is far faster than 512 decode steps",
)
for _call, _error in (
    (lambda: prefill_time(COURSE_MODEL, 1, 0, _t4_like), ValueError),
    (lambda: prefill_time(COURSE_MODEL, 1, 8, {"peak_flops": 1e12}), ValueError),
    (lambda: ttft_and_tpot(COURSE_MODEL, 1, "512", _t4_like), TypeError),
):
    try:
        _call()
    except _error:
        pass
    else:
        raise AssertionError(f"prefill_time / ttft_and_tpot must raise {_error.__name__} here")
print("prefill_time, ttft_and_tpot: self-checks passed")

# %% [markdown]
# ## 12. Look at the numbers
#
# Everything below is a demonstration: it is not graded and the autograder does not run it. Each
# cell reads what it needs from `course.toml` (or its copy in the first cell) itself, so any one
# of them can be rerun on its own.
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
# counts for memory) plus 2,212 x 512 tokens x 128 KB of cache is about 165 GB, more than an
# 80 GB H100 or a 141 GB H200 holds (`kv_cache_fits` says so). Past about 564 tokens of context,
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
# T4's 16 GB. Each panel marks the three decode points at 512 tokens of context (batch 1, 8 and
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
    ax.loglog(ai, np.minimum(ai * gpu["peak_bandwidth"], gpu["peak_flops"]) / 1e12, "k-", lw=2,
              label=f"{label} roof")
    ridge = gpu["peak_flops"] / gpu["peak_bandwidth"]
    ax.axvline(ridge, color="gray", linestyle=":", linewidth=1.5)
    ax.annotate(f"ridge {ridge:.0f}", (ridge, 0.02), xytext=(-4, 0), textcoords="offset points",
                rotation=90, ha="right", va="bottom", color="gray", fontsize=8)
    return ridge


fig, axes = plt.subplots(1, 2, figsize=(13, 5.2))
for ax, (cfg, gpu_name, color) in zip(
    axes, ((COURSE_MODEL, COURSE_GPU, "tab:blue"), (LLAMA3_8B, "H100_SXM", "tab:orange")),
    strict=True,
):
    gpu = HW[gpu_name]
    draw_roof(ax, gpu, gpu_name)
    if gpu_name == COURSE_GPU and SUSTAINED_FLOPS is not None:
        ax.axhline(SUSTAINED_FLOPS / 1e12, color="tab:red", linestyle="-.", linewidth=1,
                   label=f"practical roof, ~{SUSTAINED_FLOPS / 1e12:.0f} TFLOP/s sustained")
    batches = (1, 8, 32)
    xs = np.array([decode_intensity(cfg, b, CONTEXT_LEN) for b in batches])
    ys = np.minimum(xs * gpu["peak_bandwidth"], gpu["peak_flops"]) / 1e12
    ax.scatter(xs, ys, s=60, zorder=3, color=color,
               label=f"{cfg['name']} decode, context {CONTEXT_LEN}")
    for b, x, y in zip(batches, xs, ys, strict=True):
        ax.annotate(f"b={b}", (x, y), xytext=(-8, 8), textcoords="offset points", fontsize=8,
                    ha="right")
    ceiling = 2 * matmul_params(cfg) / (CONTEXT_LEN * kv_bytes_per_token(cfg))
    ax.axvline(ceiling, color=color, linestyle="--", linewidth=1,
               label=f"batch-to-infinity ceiling {ceiling:.3g} FLOP/byte")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("attainable performance (TFLOP/s)")
    ax.set_title(f"{cfg['name']} on the {gpu_name} (fp16 weights and KV cache)")
    ax.set_ylim(0.01, gpu["peak_flops"] / 1e12 * 3)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# ### The two kernels on the roofline
#
# The same roofs, now with the two kernels of section 10 plotted separately, for Llama-3-8B at
# 512 tokens (on the T4 with 4-bit weights and an 8-bit cache, the precisions that let it fit
# there; on the H100 in fp16). The weight matmuls (circles) slide right with the batch and climb
# onto the flat roof; attention (crosses) does not move at all, whatever the batch.

# %% tags=["demo"]
import matplotlib.pyplot as plt
import numpy as np

HW = load_hardware()
SETUPS = ((COURSE_GPU, 0.5, 1), ("H100_SXM", 2, 2))  # (gpu, weight_bytes, kv_bytes)
fig, axes = plt.subplots(1, 2, figsize=(13, 5.2))
for ax, (gpu_name, wbytes, kbytes) in zip(axes, SETUPS, strict=True):
    gpu = HW[gpu_name]
    ai = np.logspace(-1, 3.5, 400)
    ax.loglog(ai, np.minimum(ai * gpu["peak_bandwidth"], gpu["peak_flops"]) / 1e12, "k-", lw=2,
              label=f"{gpu_name} roof")
    ridge = gpu["peak_flops"] / gpu["peak_bandwidth"]
    ax.axvline(ridge, color="gray", linestyle=":", linewidth=1.5, label=f"ridge {ridge:.0f}")
    for b in (1, 16, 64, 256):
        step = decode_step_breakdown(LLAMA3_8B, b, CONTEXT_LEN, gpu, wbytes, kbytes)
        for kernel, marker, color in (("weights", "o", "tab:blue"), ("attention", "X", "tab:red")):
            k = step[kernel]
            y = min(k["intensity"] * gpu["peak_bandwidth"], gpu["peak_flops"]) / 1e12
            first = b == 1
            ax.scatter(k["intensity"], y, marker=marker, s=70, color=color, zorder=3,
                       label=(f"{kernel} matmuls" if kernel == "weights" else
                              "attention (the same point at every batch)") if first else None)
            if kernel == "weights":
                ax.annotate(f"b={b}", (k["intensity"], y), xytext=(-8, 8),
                            textcoords="offset points", fontsize=8, ha="right")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("attainable performance (TFLOP/s)")
    ax.set_title(f"Llama-3-8B decode kernels on the {gpu_name}\n"
                 f"{wbytes:g} B per weight, {kbytes:g} B per cached number, context {CONTEXT_LEN}")
    ax.set_ylim(0.1, gpu["peak_flops"] / 1e12 * 3)
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
# matmuls turn compute-bound ($\text{ridge} \cdot \text{weight\_bytes} / 2$: past it, a bigger
# batch costs time in proportion), and the memory-capacity wall (`max_batch_that_fits`: past it,
# the caches do not fit). On the T4 the 4-bit weights turn compute-bound at batch 51, well inside
# its wall of 357; on the H100 in fp16, at 296 against a wall of 952 (past a wall the curves
# fade: those batches do not fit). Past the first line tokens/s stops rising: both kernels' times
# now grow in proportion to the batch (the weights on the compute roof, attention on the
# bandwidth roof), so a bigger batch only makes every token wait longer. The batch worth running
# is near the line where the weights turn compute-bound, provided it is left of the wall.

# %% tags=["demo"]
import matplotlib.pyplot as plt
import numpy as np

HW = load_hardware()
SETUPS = ((COURSE_GPU, 0.5, 1, "tab:blue"), ("H100_SXM", 2, 2, "tab:orange"))
fig, (ax_rate, ax_time) = plt.subplots(1, 2, figsize=(13, 5))
batches = np.unique(np.logspace(0, 12, 200, base=2).astype(int))
for gpu_name, wbytes, kbytes, color in SETUPS:
    gpu = HW[gpu_name]
    tpot = np.array([
        decode_step_breakdown(LLAMA3_8B, int(b), CONTEXT_LEN, gpu, wbytes, kbytes)["time_s"]
        for b in batches
    ])
    label = f"{gpu_name}, {wbytes:g} B weights, {kbytes:g} B cache"
    wall = max_batch_that_fits(LLAMA3_8B, gpu, CONTEXT_LEN, wbytes, kbytes)
    fits = batches <= wall
    ax_rate.loglog(batches[fits], (batches / tpot)[fits], color=color, label=label)
    ax_time.loglog(batches[fits], (tpot * 1e3)[fits], color=color, label=label)
    for ax, ys in ((ax_rate, batches / tpot), (ax_time, tpot * 1e3)):  # past the wall: faint
        ax.loglog(batches[~fits], ys[~fits], color=color, alpha=0.25, linestyle="--")
    turn = math.ceil(gpu["peak_flops"] / gpu["peak_bandwidth"] * wbytes / 2)
    for ax in (ax_rate, ax_time):
        ax.axvline(wall, color=color, linestyle="-", alpha=0.5, linewidth=3,
                   label=f"{gpu_name} memory wall: batch {wall}")
        ax.axvline(turn, color=color, linestyle=":", linewidth=1.5,
                   label=f"{gpu_name} weights compute-bound from batch {turn}")
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
# ### Prefill against decode, and the regime below the roofline
#
# TTFT and TPOT for a 512-token prompt at batch 1, from `ttft_and_tpot`:

# %% tags=["demo"]
HW = load_hardware()
for cfg, gpu_name, wbytes, kbytes in (
    (COURSE_MODEL, COURSE_GPU, 2, 2),
    (COURSE_MODEL, "H100_SXM", 2, 2),
    (LLAMA3_8B, COURSE_GPU, 0.5, 1),
    (LLAMA3_8B, "H100_SXM", 2, 2),
):
    ttft, tpot = ttft_and_tpot(cfg, 1, CONTEXT_LEN, HW[gpu_name], wbytes, kbytes)
    print(
        f"{cfg['name']:<13} {gpu_name:<9} weights {wbytes:g} B, cache {kbytes:g} B: "
        f"TTFT {ttft * 1e3:8.4f} ms   TPOT {tpot * 1e3:8.4f} ms"
    )

# %% [markdown]
# The course model's numbers are too good to be true. On the T4 its whole decode step should take
# about 10 µs by the roofline, but a step is not one kernel: each layer launches a dozen or so
# (two RMSNorms, the q/k/v projections, RoPE, attention, the output projection, the three MLP
# matmuls and their SiLU-multiply, two residual adds), plus the embedding, the final norm and the
# head. Each launch costs a few microseconds of CPU and driver time whatever the kernel does
# (you measured it in S5.1). With $k$ kernels per step and $t_\text{launch}$ per launch,
#
# $$t_\text{step} \ge \max\left(k \cdot t_\text{launch},\; \text{the roofline time}\right),$$
#
# and for the course model the first term wins by an order of magnitude: decode is
# **overhead-bound**, a regime the roofline cannot show. The cure is to launch less (CUDA graphs,
# fused kernels), not to move fewer bytes. The cell below puts numbers on it with an assumed
# 5 µs per launch: replace it with your own S5.1 measurement.

# %% tags=["demo"]
HW = load_hardware()
LAUNCH_S = 5e-6  # an assumption: measure yours in S5.1
for cfg in (COURSE_MODEL, LLAMA3_8B):
    kernels = 12 * cfg["n_layers"] + 3
    gpu = HW["H100_SXM"] if cfg is LLAMA3_8B else HW[COURSE_GPU]
    roof = decode_step_breakdown(cfg, 1, CONTEXT_LEN, gpu)["time_s"]
    print(
        f"{cfg['name']:<13} on the {gpu['name']:<9}: roofline {roof * 1e6:9.1f} µs, "
        f"{kernels} launches x {LAUNCH_S * 1e6:.0f} µs = {kernels * LAUNCH_S * 1e6:7.1f} µs -> "
        f"{'overhead' if kernels * LAUNCH_S > roof else 'roofline'}-bound"
    )

# %% [markdown]
# ## 13. Record the milestone
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
