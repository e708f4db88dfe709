"""Helpers the suites share: assertions whose failure messages are a student's feedback.

Shipped to students with the public suites; nothing here knows an answer.
"""

from __future__ import annotations

import json
import math
import re
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from grader.suites.student import StudentError


def expect_value_error(call: Callable[[], Any], what: str, hint: str) -> None:
    """Fail with a useful message unless the student's code, called by call(), raised ValueError.

    Only a `StudentError` counts: a ValueError raised in this (trusted) process, say while a
    reply is decoded, is the grader's and propagates as the test's error, never as a pass.
    """
    try:
        result = call()
    except StudentError as exc:
        if isinstance(exc, ValueError) and not exc.grader:
            return
        if exc.stub:
            pytest.fail(exc.feedback())
        pytest.fail(f"{what} raised {exc.exc_type} ({exc.message}); expected ValueError. {hint}")
    pytest.fail(f"{what} returned {result!r}; expected it to raise ValueError. {hint}")


# What a kernel's output array holds before a launch: a quiet NaN with a payload of the
# grader's own. Arithmetic never makes it (an operation gives the default NaN or passes on an
# operand's), so an element still holding it was never written, and a NaN the kernel wrote is
# told apart from nothing written.
_UNWRITTEN = {
    np.dtype(np.float32): np.array([0x7FC0_0BAD], np.uint32).view(np.float32)[0],
    np.dtype(np.float64): np.array([0x7FF8_0000_0000_0BAD], np.uint64).view(np.float64)[0],
}


def unwritten(shape: int | tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    """An output array (float32 or float64) filled with the grader's "never written" NaN."""
    return np.full(shape, _UNWRITTEN[np.dtype(dtype)], dtype=dtype)


def never_written(out: np.ndarray) -> np.ndarray:
    """Which elements of `out` (from `unwritten`) still hold the value the grader put there."""
    marker = _UNWRITTEN.get(out.dtype)
    if marker is None:
        return np.zeros(out.shape, bool)
    bits = np.dtype(f"u{out.dtype.itemsize}")
    return out.view(bits) == marker.view(bits)


def expect_written(out: np.ndarray, name: str, array: str) -> None:
    """Fail, saying so, when the kernel wrote no element of `out` (an `unwritten` array)."""
    if never_written(out).all():
        pytest.fail(
            f"{name} wrote nothing into {array} (every element still holds the NaN the grader "
            "filled it with): fill in the kernel's body",
            pytrace=False,
        )


def _said(got: np.ndarray, i: int) -> str:
    if never_written(got).flat[i]:
        return "nothing (never written)"
    value = got.flat[i]
    return "NaN (the kernel wrote NaN)" if np.isnan(value) else str(value)


def first_mismatch(got: np.ndarray, want: np.ndarray, ok: np.ndarray | None = None) -> str:
    """How two arrays differ (NaN equals NaN), for an assertion message: "never written" for
    an element of an `unwritten` array the kernel did not write, "wrote NaN" for one it did.
    `ok` marks the elements that pass when the comparison has a tolerance (else: equal)."""
    if ok is None:
        same = (got == want) | (np.isnan(got) & np.isnan(want) & ~never_written(got))
    else:
        same = ok & ~never_written(got)
    bad = np.flatnonzero(~same)
    if bad.size == 0:
        return "all elements match"
    i = int(bad[0])
    return (
        f"{bad.size} of {want.size} elements differ; first at flat index {i}: got "
        f"{_said(got, i)}, expected {want.flat[i]}"
    )


def launch(kernel: Any, blocks: Any, tpb: Any, *args: Any, n: int, name: str) -> None:
    """Launch a student kernel (1-D ints or 2-D tuples); out-of-bounds becomes a clear failure
    that names the check for the launch's dimensions."""
    try:
        kernel[blocks, tpb](*args)
    except IndexError as exc:
        threads = math.prod(blocks if isinstance(blocks, tuple) else (blocks,)) * math.prod(
            tpb if isinstance(tpb, tuple) else (tpb,)
        )
        if isinstance(blocks, tuple) and len(blocks) > 1:
            check = (
                "The last blocks along each axis are only partly needed: a thread must check "
                "both coordinates against the array's shape before it reads or writes (the row "
                "against `shape[0]`, the column against `shape[1]`)"
            )
        else:
            check = (
                "The last block is only partly needed: threads whose global index is >= the "
                "array size must do nothing (a bounds check such as `if i < c.size:` around "
                "the body)"
            )
        pytest.fail(
            f"{name} accessed an array out of bounds with n={n} elements and {blocks} blocks of "
            f"{tpb} threads ({threads} threads; {exc}). {check}"
        )


# The metrics record's helpers (`REPRODUCED_KEYS` to `require_course_size`): they grade M9's
# metrics.json (course.toml's [metrics]) for its public and hidden suites alike, and stay here
# because under the runner's --import-mode=importlib a suite cannot import a module beside it
# (nor one suite folder the other's), while a copy in each suite would split the one rule.
REPRODUCED_KEYS = (
    "params",
    "intensity_b1",
    "intensity_b8",
    "intensity_b32",
    "crossover_batch",
    "conclusion",
)


def _agrees(got: Any, want: Any) -> bool:
    if type(got) is float and type(want) is float:
        return math.isclose(got, want, rel_tol=1e-9)
    return type(got) is type(want) and got == want


_REPRODUCED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def require_reproduced(student: Any, record: dict, where: str) -> None:
    """Fail unless the student's own m9_record, called in the sandbox with the model, GPU,
    context and dtype the record names, returns the record's figures (`REPRODUCED_KEYS`).

    One call per distinct record and grading (kept with the grading's backend), so the metrics
    tests cost one call together and a hang costs one timeout.
    """
    cache = _REPRODUCED.setdefault(student._backend, {})
    args = tuple(record.get(k) for k in ("model", "gpu", "context_len", "dtype_bytes"))
    key = json.dumps(args, sort_keys=True, default=repr)
    if key not in cache:
        try:
            cache[key] = ("ok", student.m9_record(*args))
        except StudentError as exc:
            cache[key] = ("error", exc.feedback())
    kind, got = cache[key]
    call = "m9_record(record['model'], record['gpu'], record['context_len'], record['dtype_bytes'])"
    if kind == "error":
        pytest.fail(
            f"{where} earns points only when your own {call} reproduces it, and that call "
            f"failed: {got}",
            pytrace=False,
        )
    if not isinstance(got, dict):
        pytest.fail(
            f"{where}: your {call} returned {type(got).__name__}, not a dict", pytrace=False
        )
    differ = [k for k in REPRODUCED_KEYS if not _agrees(record.get(k), got.get(k))]
    if differ:
        k = differ[0]
        pytest.fail(
            f"{where}['{k}'] is {record.get(k)!r} but your own {call} gives {got.get(k)!r} "
            f"(differing keys: {differ}); the record earns points only when your functions "
            "reproduce it: rerun the notebook's last cell and commit metrics.json",
            pytrace=False,
        )


# Python's own TypeError for a call that does not fit a signature: not the student's answer.
_CALL_MISMATCH = re.compile(
    r"\(\) (takes \d|takes from|missing \d+ required|got an unexpected keyword|got multiple)"
)


def expect_raises(call: Callable[[], Any], error: type[Exception], what: str, hint: str) -> None:
    """Fail with a useful message unless call() raises `error` from the student's own code.

    The notebooks' one error convention: TypeError for a value of the wrong type, ValueError for
    a value of the right type out of range. Only a StudentError counts: an exception raised in
    this (trusted) process is the grader's, never the student's answer.
    """
    try:
        result = call()
    except StudentError as exc:
        if isinstance(exc, error) and not _CALL_MISMATCH.search(exc.message or ""):
            return
        if exc.stub:
            pytest.fail(exc.feedback())
        if isinstance(exc, error):
            pytest.fail(
                f"{what} raised TypeError because the call does not fit the function's "
                f"parameters ({exc.message}), not because the function checked its argument; "
                "keep the signature the notebook gives"
            )
        pytest.fail(
            f"{what} raised {exc.exc_type} ({exc.message}); expected {error.__name__}. {hint}"
        )
    pytest.fail(f"{what} returned {result!r}; expected it to raise {error.__name__}. {hint}")


def count_weights(cfg: dict) -> int:
    """Weights of a LLaMA-style config, counted matrix by matrix (the M9 size rule's measure).

    Trusted-side arithmetic on the recorded config, so that the size rule never relies on the
    student's own count. `cfg` must already be a valid config.
    """
    d, h, kv = cfg["dim"], cfg["n_heads"], cfg["n_kv_heads"]
    kv_width = kv * (d // h)
    tables = 1 if cfg["tied_embeddings"] else 2
    shapes_per_layer = [(d, d), (d, kv_width), (d, kv_width), (d, d)]  # wq, wk, wv, wo
    shapes_per_layer += [(d, cfg["ffn_hidden_dim"])] * 3 + [(1, d)] * 2  # w1, w2, w3, two gains
    layer = sum(rows * cols for rows, cols in shapes_per_layer)
    return tables * cfg["vocab_size"] * d + cfg["n_layers"] * layer + d


def require_course_size(params: int, course_params: int, where: str) -> None:
    """The one size rule of the M9 record, for the public and the hidden suites alike: the
    recorded model has at least as many weights as the course model. No single dimension is
    compared, so a wider model with a smaller vocabulary passes."""
    if type(params) is not int or params < course_params:
        pytest.fail(
            f"{where}['model'] is smaller than the course model: {params:,} weights, fewer "
            f"than its {course_params:,}; record the course model (COURSE_MODEL) or a model at "
            "least that large (num_params(model) >= num_params(COURSE_MODEL))",
            pytrace=False,
        )
