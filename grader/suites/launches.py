"""What every launch from the trusted side shares, below the modules that launch.

The launch's vocabulary: its checked dimensions (`dims`), the signature it compiles for
(`signature`), its outputs checked against its arguments (`outputs`, `same_array`), its
compute-sanitizer findings as the test's failure (`finding_failure`), and what a
launch is to the modules that take one (`KernelLaunch`, `KernelFunction`). `grader.suites.kernels`
(`Launch`), `grader.suites.memory` and `grader.suites.timing` import this module, never each
other's launch, so the suites import one way: student -> kernels -> memory, timing -> launches.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from grader.core import kernel_source, sourcemap
from grader.sandbox.protocol import KERNEL_REFUSED, MAX_FINDINGS, SANITIZER_FINDING
from grader.simt import sanitizer
from grader.suites.errors import StudentError, grader_error, malformed


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


def finding_failure(
    body: Any, source: kernel_source.KernelSource, smap: sourcemap.SourceMap, name: str
) -> StudentError:
    """A launch's compute-sanitizer findings (`grader.simt.sanitizer`) as the test's failure:
    the first said with the student's lines and shared arrays' variables, how many more."""
    raw = body.get("findings") if isinstance(body, dict) and set(body) == {"findings"} else None
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_FINDINGS:
        return malformed("a launch's findings that are not a list of findings", name)
    try:
        found = [sanitizer.Finding.from_plain(f) for f in raw]
    except sanitizer.FindingError as exc:
        return malformed(f"a sanitizer finding that does not add up ({exc})", name)
    lines = dict(source.lines)

    def where(line: int) -> str:
        return smap.where(lines[line]) if line in lines else f"line {line} of {name}"

    names = {f"shared@{line}": var for line, var in source.shared_arrays().items()}
    more = len(found) - 1
    tail = f" (and {more} more finding{'s' * (more > 1)})" if more else ""
    return grader_error(
        SANITIZER_FINDING,
        f"{name}: {found[0].said(where, names)}{tail}. A launch with a compute-sanitizer "
        "finding earns no correctness points, even when its output happens to be right",
        name,
    )
