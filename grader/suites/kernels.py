"""Launching a graded kernel from the trusted side: launch dimensions, output checks, timing.

A kernel's outputs come back from a kernel worker that loads no notebook; they must match the
arguments in shape and dtype (`outputs`), and a replayed or timed launch must reproduce a single
launch exactly (`same_array`). `Launch.time` is a median time per launch by the one timing
routine (`grader.suites.timing`), which the GPU tests call directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from grader.core import kernel_source, sourcemap
from grader.sandbox.protocol import KERNEL_REFUSED, MAX_FINDINGS, SANITIZER_FINDING
from grader.simt import sanitizer
from grader.suites.errors import StudentError, grader_error, malformed

if TYPE_CHECKING:
    from grader.suites.memory import Profiled
    from grader.suites.student import Function


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


def same_array(got: Any, want: Any) -> bool:
    """Equal shape, dtype and values (NaN equals NaN)."""
    if not (isinstance(got, np.ndarray) and isinstance(want, np.ndarray)):
        return False
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    return bool(np.array_equal(got, want, equal_nan=got.dtype.kind in "fc"))


class Launch:
    """``student.kernel[grid, block]``: call it to launch; arrays are copied back in place."""

    def __init__(self, function: Function, grid: Any, block: Any):
        self.function, self.grid, self.block = function, grid, block

    def __call__(self, *args: Any) -> None:
        s, name = self.function._student, self.function.name
        out = s._launch(name, self.grid, self.block, list(args))
        for original, result in zip(args, out, strict=True):
            if isinstance(original, np.ndarray):
                np.copyto(original, result)

    def profile(self, *args: Any) -> Profiled:
        """One launch in the simulator with its memory accesses recorded: its outputs (copied
        back in place, as a call does) and its memory profile (`grader.suites.memory`)."""
        from grader.suites import memory  # memory imports this module's helpers

        return memory.profile(self, list(args))

    def time(self, *args: Any, outputs: Sequence[int]) -> float:
        """Median milliseconds per launch on the trusted side's clock, by the one timing routine
        (`grader.suites.timing`; the GPU tests call it directly, with two input variants).

        The arguments at `outputs` are the kernel's outputs: a single launch on the arguments
        gives what every timed launch must write, into outputs filled with NaN before each
        sample. A kernel whose timed launches write anything else is refused.
        """
        from grader.core import timing as core_timing  # lazy: the timing modules import this one
        from grader.suites import timing

        single = self.function._student._launch(
            self.function.name, dims(self.grid, "grid"), dims(self.block, "block"), list(args)
        )
        expected: dict[int, Sequence[np.ndarray]] = {
            int(i): [single[int(i)]] * core_timing.K_IN for i in outputs
        }
        target = timing.KernelTarget(self, [list(args)] * core_timing.K_IN, expected, 0)
        policy = core_timing.Policy(min_rounds=3, max_rounds=5, max_s=10.0)
        try:
            series = core_timing.measure([target], policy, core_timing.Device("", None))
            target.final_check(series[target.label].launches)
        except core_timing.WrongOutput as exc:
            raise grader_error(
                KERNEL_REFUSED,
                f"{exc}; a timed kernel must compute the same result as a single launch",
                self.function.name,
            ) from None
        finally:
            target.close()
        return series[target.label].stats().median * 1e3
