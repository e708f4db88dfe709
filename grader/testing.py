"""Helpers the suites share: assertions whose failure messages are a student's feedback.

Shipped to students with the public suites; nothing here knows an answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from grader.student import StudentError


def expect_value_error(call: Callable[[], Any], what: str, hint: str) -> None:
    """Fail with a useful message unless call() raises ValueError."""
    try:
        result = call()
    except ValueError:
        return
    except StudentError as exc:
        pytest.fail(f"{what} raised {exc.exc_type} ({exc.message}); expected ValueError. {hint}")
    pytest.fail(f"{what} returned {result!r}; expected it to raise ValueError. {hint}")


def first_mismatch(got: np.ndarray, want: np.ndarray) -> str:
    """How two arrays differ (NaN equals NaN), for an assertion message."""
    bad = np.flatnonzero(~((got == want) | (np.isnan(got) & np.isnan(want))))
    if bad.size == 0:
        return "all elements match"
    i = int(bad[0])
    return (
        f"{bad.size} of {want.size} elements differ; first at flat index {i}: got "
        f"{got.flat[i]}, expected {want.flat[i]}"
    )


def launch(kernel: Any, blocks: Any, tpb: Any, *args: Any, n: int, name: str) -> None:
    """Launch a student kernel (1-D ints or 2-D tuples); out-of-bounds becomes a clear failure."""
    try:
        kernel[blocks, tpb](*args)
    except IndexError as exc:
        threads = math.prod(blocks if isinstance(blocks, tuple) else (blocks,)) * math.prod(
            tpb if isinstance(tpb, tuple) else (tpb,)
        )
        pytest.fail(
            f"{name} accessed an array out of bounds with n={n} elements and {blocks} blocks of "
            f"{tpb} threads ({threads} threads; {exc}). The last block is only partly "
            "needed: threads whose global index is >= the array size must do nothing (a bounds "
            "check such as `if i < c.size:` around the body)"
        )
