"""Launching a graded kernel from the trusted side: launch dimensions, output checks, timing.

A kernel's outputs come back from a kernel worker that loads no notebook; they must match the
arguments in shape and dtype (`outputs`), and a replayed or timed launch must reproduce a single
launch exactly (`same_array`). `Launch.time` is the trusted clock: wall time in this process
around one request that launches the kernel R times and synchronizes.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from grader.core import kernel_source
from grader.sandbox.protocol import KERNEL_REFUSED
from grader.suites.errors import grader_error, malformed

if TYPE_CHECKING:
    from grader.suites.student import Function

TIME_TARGET_S = 0.25  # a timed request lasts at least this long: it swamps the round trip
MAX_TIMED_LAUNCHES = 100_000


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

    def time(self, *args: Any, repeat: int = 10) -> float:
        """Milliseconds per launch on the trusted side's clock.

        The arguments are staged on the kernel worker once; one request then launches the
        kernel R times and synchronizes, and the wall time around that request, measured in
        this process, divided by R is the answer. R (at least `repeat`) is chosen so that the
        request lasts about TIME_TARGET_S, which swamps the round trip. The timed launches'
        outputs must equal those of a single launch on the same inputs.
        """
        s, name = self.function._student, self.function.name
        grid, block = dims(self.grid, "grid"), dims(self.block, "block")
        single = s._launch(name, grid, block, list(args))  # compiled and checked first
        started = time.monotonic()

        def ask(req: dict) -> dict:
            left = s._kernel_timeout - (time.monotonic() - started)
            reply = s._backend.kernel(req, max(1.0, left), "run")
            if "error" in reply:
                raise s._error(reply["error"], name, "kernel_timeout_s")
            return reply

        ask(s._kernel_req("kernel_stage", name, grid=grid, block=block, args=list(args)))
        repeat = max(1, int(repeat))
        wall = ask({"op": "kernel_run", "repeat": repeat}).get("wall_s")
        if not isinstance(wall, float):
            raise malformed("a timed run without the trusted clock", name)
        if wall < TIME_TARGET_S:
            scaled = int(repeat * TIME_TARGET_S / max(wall, 1e-6)) + 1
            repeat = min(MAX_TIMED_LAUNCHES, max(repeat, scaled))
            wall = ask({"op": "kernel_run", "repeat": repeat})["wall_s"]
        timed = outputs(ask({"op": "kernel_fetch"})["ok"], args, name)
        for i, (want, got) in enumerate(zip(single, timed, strict=True)):
            if want is not None and not same_array(got, want):
                raise grader_error(
                    KERNEL_REFUSED,
                    f"after {repeat} timed launches argument {i} of {name} differs from a single "
                    "launch on the same inputs; a timed kernel must compute the same result",
                    name,
                )
        return wall * 1e3 / repeat
