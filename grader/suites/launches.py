"""What every launch from the trusted side shares, below the modules that launch.

The launch's vocabulary: its checked dimensions (`dims`), the signature it compiles for
(`signature`), its outputs checked against its arguments (`outputs`, `same_array`), and what a
launch is to the modules that take one (`KernelLaunch`, `KernelFunction`). `grader.suites.kernels`
(`Launch`), `grader.suites.memory` and `grader.suites.timing` import this module, never each
other's launch, so the suites import one way: student -> kernels -> memory, timing -> launches.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from grader.core import kernel_source
from grader.sandbox.protocol import KERNEL_REFUSED
from grader.suites.errors import grader_error, malformed


class KernelFunction(Protocol):
    """A student's kernel as the facade names it (`grader.suites.student.Function`)."""

    name: str
    _student: Any  # the `grader.suites.student.Student` that launches it


class KernelLaunch(Protocol):
    """``student.kernel[grid, block]`` (`grader.suites.kernels.Launch`)."""

    function: KernelFunction
    grid: Any
    block: Any


def signature(args: list, name: str) -> str:
    try:
        return kernel_source.signature(args)
    except kernel_source.KernelSourceError as exc:
        raise grader_error(KERNEL_REFUSED, f"launching {name}: {exc}", name) from None


def dims(value: Any, what: str) -> int | tuple[int, ...]:
    """A launch dimension as plain ints (numpy integers accepted), checked."""
    items = value if isinstance(value, (tuple, list)) else (value,)
    ok = 1 <= len(items) <= 3 and all(
        isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_)) and d >= 1
        for d in items
    )
    if not ok:
        raise grader_error(
            KERNEL_REFUSED,
            f"the launch {what} must be a positive int or a tuple of up to 3, got {value!r}",
        )
    checked = tuple(int(d) for d in items)
    return checked if isinstance(value, (tuple, list)) else checked[0]


def outputs(out: Any, args: list | tuple, name: str) -> list:
    if not isinstance(out, list) or len(out) != len(args):
        raise malformed("a launch reply that does not match the arguments", name)
    for original, result in zip(args, out, strict=True):
        if isinstance(original, np.ndarray) and (
            not isinstance(result, np.ndarray)
            or result.shape != original.shape
            or result.dtype != original.dtype
        ):
            raise malformed("kernel output changed shape or dtype", name)
    return out


def same_array(got: Any, want: Any) -> bool:
    """Equal shape, dtype and values (NaN equals NaN)."""
    if not (isinstance(got, np.ndarray) and isinstance(want, np.ndarray)):
        return False
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    return bool(np.array_equal(got, want, equal_nan=got.dtype.kind in "fc"))
