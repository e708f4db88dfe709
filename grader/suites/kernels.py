"""Launching a graded kernel from the trusted side: ``student.kernel[grid, block]`` (`Launch`).

A call launches it (its outputs checked against the arguments by `grader.suites.launches`),
`Launch.profile` profiles its memory (`grader.suites.memory`) and `Launch.time` gives a median
time per launch by the one timing routine (`grader.suites.timing`, which the GPU tests call
directly). The launch's helpers live in `grader.suites.launches`, so this module imports memory
and timing and neither imports it back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from grader.core import timing as core_timing
from grader.sandbox.protocol import KERNEL_REFUSED
from grader.suites import memory, timing
from grader.suites.errors import grader_error
from grader.suites.launches import KernelFunction, dims
from grader.suites.memory import Profiled


class Launch:
    """``student.kernel[grid, block]``: call it to launch; arrays are copied back in place."""

    def __init__(self, function: KernelFunction, grid: Any, block: Any):
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
        return memory.profile(self, list(args))

    def time(self, *args: Any, outputs: Sequence[int]) -> float:
        """Median milliseconds per launch on the trusted side's clock, by the one timing routine
        (`grader.suites.timing`; the GPU tests call it directly, with two input variants).

        The arguments at `outputs` are the kernel's outputs: a single launch on the arguments
        gives what every timed launch must write, into outputs filled with NaN before each
        sample. A kernel whose timed launches write anything else is refused.
        """
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
