"""Records the global and shared memory accesses of one simulated launch.

The recording half of the memory model (`grader.simt.memmodel` groups what is recorded into warp
requests). It runs in the process that launches the kernel in Numba's simulator (the kernel
worker, or the in-process backend of a student's own `grader check`), as the grader's code
around the kernel, never inside it:

* each array argument of the launch becomes a `TracedArray`, the simulator's own device array
  with its element reads and writes recorded: the simulated thread (from the scheduler of
  `grader.simt.simulator`), the line of the kernel's source that made the access (the innermost
  frame of the kernel's file, so an access in a device function is that function's line), the
  byte offset from the array's base, and load or store. A slice or view of a traced array is
  traced too, with its own offset into the same base;
* each shared array the block allocates is traced the same way (`simulator.observe`);
* an atomic (``cuda.atomic.*``) is one access of its own, not the load and store the simulator
  makes of it;
* local arrays (``cuda.local.array``) and constant arrays (``cuda.const.array_like``) are not
  global memory and are not recorded; nor are scalars.

Recording is per launch and off unless asked for (`Recorder` as a context manager): a launch
without it runs exactly as before. The recorder holds plain integers; what crosses the sandbox
is the summary (`Recorder.profile`), never the objects.
"""

from __future__ import annotations

import operator
import sys
import threading
from typing import Any

from grader.core.errors import SubmissionError
from grader.simt import memmodel, simulator

KERNEL_FILE = "<graded kernel>"  # the file name the kernel host compiles extracted source under
MAX_ACCESSES = 2_000_000  # a profiling launch is small; past this the recorder refuses


class TooManyAccesses(SubmissionError):
    """A profiled launch made more accesses than the recorder keeps (the kernel's doing: it
    reaches the trusted side as the kernel's error)."""


def _devicearray() -> Any:
    from numba.cuda.simulator.cudadrv import devicearray  # lazy: after the simulator switch

    return devicearray


def _traced_class() -> type:
    """`TracedArray`, a subclass of the simulator's device array (built once numba is loaded)."""
    global _TRACED
    if _TRACED is None:
        base = _devicearray().FakeCUDAArray

        class TracedArray(base):  # type: ignore[misc, valid-type]  # the simulator's class
            """A simulated device array whose element accesses are recorded."""

            def __init__(self, ary: Any, recorder: Recorder, name: str, offset: int) -> None:
                super().__init__(ary)
                self._recorder = recorder
                self._name = name
                self._offset = offset
                self._shape = ary.shape  # read on every access: kept as plain tuples
                self._strides = ary.strides

            def __getitem__(self, index: Any) -> Any:
                value = self._ary[index]
                if type(value) in _VIEW_TYPES:
                    return self._view(value)
                self._recorder.access(self, index, memmodel.LOAD)
                return value

            def __setitem__(self, index: Any, value: Any) -> None:
                self._ary[index] = value
                if _is_element(self._ary, index):
                    self._recorder.access(self, index, memmodel.STORE)

            def _view(self, view: Any) -> Any:
                start = (
                    view.__array_interface__["data"][0] - self._ary.__array_interface__["data"][0]
                )
                return TracedArray(view, self._recorder, self._name, self._offset + start)

        _TRACED = TracedArray
    return _TRACED


_TRACED: type | None = None
_VIEW_TYPES: tuple[type, ...] = ()


def _is_element(array: Any, index: Any) -> bool:
    """Whether `index` names one element of `array` (a store to a slice is not traced)."""
    parts = index if type(index) is tuple else (index,)
    if len(parts) != array.ndim:
        return False
    try:
        for p in parts:
            operator.index(p)
    except TypeError:
        return False
    return True


def _unwrap(array: Any) -> Any:
    """The simulator's in-kernel wrapper's array (what a kernel holds is wrapped)."""
    item = getattr(array, "__dict__", {}).get("_item")
    return item if item is not None else array


def _raw(traced: Any) -> Any:
    """The NumPy array under a traced array: the simulator's own work on it is not traced."""
    return traced._ary


class Recorder(simulator.Observer):
    """The accesses of one launch: use as ``with Recorder() as rec:`` around the launch, with
    each array argument passed through `rec.argument`; then `rec.profile(grid, block)`."""

    def __init__(self, kernel_file: str = KERNEL_FILE) -> None:
        self._file = kernel_file
        self._keys: list[memmodel.SiteKey] = []
        self._key_ids: dict[tuple, int] = {}
        self._accesses: list[tuple[int, int, int, int]] = []
        self._arrays: dict[str, tuple[str, int, int]] = {}
        self._barriers: dict[int, int] = {}
        self._block: Any = None  # the Dim3 of the block that made the last access, and its id
        self._block_linear = 0
        self._grid = (1, 1, 1)
        self._shared = 0
        self._previous: simulator.Observer | None = None
        self._restore: list[tuple[Any, str, Any]] = []

    # ---- set-up

    def argument(self, device_array: Any, name: str) -> Any:
        """A traced stand-in for one of the launch's device arrays (same memory)."""
        ary = device_array._ary if hasattr(device_array, "_ary") else device_array
        self._arrays[name] = (memmodel.GLOBAL, int(ary.dtype.itemsize), int(ary.size))
        return _traced_class()(ary, self, name, 0)

    def launching(self, grid: tuple[int, int, int]) -> None:
        """The grid of the launch about to run (to number its blocks)."""
        self._grid = grid

    def __enter__(self) -> Recorder:
        global _VIEW_TYPES
        import numpy as np  # lazy: numba already imported it

        _VIEW_TYPES = (np.ndarray, np.void)
        _traced_class()
        self._previous = simulator.observe(self)
        self._patch_atomics_and_constants()
        return self

    def __exit__(self, *exc: object) -> None:
        simulator.observe(self._previous)
        for owner, name, original in reversed(self._restore):
            setattr(owner, name, original)
        self._restore.clear()

    # ---- what the simulator tells

    def shared_array(self, array: Any, key: tuple[str, int, int]) -> Any:
        name = simulator.shared_name(key)
        if key[0] != self._file:  # not the kernel's own: the simulator's, untraced
            return array
        self._arrays[name] = (memmodel.SHARED, int(array.dtype.itemsize), int(array.size))
        return _traced_class()(array, self, name, 0)

    def barrier(self, block: tuple[int, int, int]) -> None:
        b = self._block_id(block)
        self._barriers[b] = self._barriers.get(b, 0) + 1

    def access(self, array: Any, index: Any, op: str) -> None:
        """One thread's access of one element of a traced array (on every access: kept lean)."""
        frame: Any = sys._getframe(2)
        while frame is not None and frame.f_code.co_filename != self._file:
            frame = frame.f_back
        if frame is None:  # not made by the kernel (the grader's own copy): not the kernel's
            return
        thread: Any = threading.current_thread()  # the scheduler's carrier, a simulated thread
        raw = (frame.f_lineno, array._name, op)
        site = self._key_ids.get(raw)
        if site is None:
            site = self._new_site(raw)
        offset = array._offset
        if type(index) is int:
            offset += (index + array._shape[0] if index < 0 else index) * array._strides[0]
        else:
            parts = index if type(index) is tuple else (index,)
            for i, n, stride in zip(parts, array._shape, array._strides, strict=False):
                i = operator.index(i)
                offset += (i + n if i < 0 else i) * stride
        block = thread.blockIdx
        if block is not self._block:  # the scheduler gives a block's threads one Dim3
            self._block, self._block_linear = block, self._block_id(tuple(block))
        accesses = self._accesses
        if len(accesses) >= MAX_ACCESSES:
            raise TooManyAccesses(f"a profiled launch made more than {MAX_ACCESSES:,} accesses")
        accesses.append((self._block_linear, thread.thread_id, site, offset))

    def _new_site(self, raw: tuple[int, str, str]) -> int:
        line, name, op = raw
        space, itemsize, _ = self._arrays[name]
        site = self._key_ids[raw] = len(self._keys)
        self._keys.append(memmodel.SiteKey(line, name, space, op, itemsize))
        return site

    def _block_id(self, block: tuple[int, int, int]) -> int:
        gx, gy, _ = self._grid
        return block[0] + gx * (block[1] + gy * block[2])

    # ---- atomics and constants

    def _patch_atomics_and_constants(self) -> None:
        from numba.cuda.simulator import kernelapi  # lazy: after the simulator switch

        recorder = self
        atomic = kernelapi.FakeCUDAAtomic
        for name in (
            "add",
            "sub",
            "and_",
            "or_",
            "xor",
            "inc",
            "dec",
            "exch",
            "max",
            "min",
            "nanmax",
            "nanmin",
            "cas",
        ):
            original = getattr(atomic, name, None)
            if original is None:
                continue

            def traced(self: Any, array: Any, index: Any, *rest: Any, _f: Any = original) -> Any:
                item: Any = _unwrap(array)
                if isinstance(item, _traced_class()):
                    recorder.access(item, index, memmodel.ATOMIC)
                    return _f(self, _raw(item), index, *rest)
                return _f(self, array, index, *rest)

            self._restore.append((atomic, name, original))
            setattr(atomic, name, traced)
        const = kernelapi.FakeCUDAConst
        original_like = const.array_like

        def array_like(self: Any, ary: Any) -> Any:
            item: Any = _unwrap(ary)
            return _raw(item) if isinstance(item, _traced_class()) else original_like(self, ary)

        self._restore.append((const, "array_like", original_like))
        const.array_like = array_like  # type: ignore[method-assign]  # restored on exit

    # ---- the result

    def profile(
        self, grid: tuple[int, int, int], block: tuple[int, int, int]
    ) -> memmodel.LaunchProfile:
        """The launch's `memmodel.LaunchProfile`."""
        return memmodel.summarise(
            grid, block, self._keys, self._accesses, self._arrays, self._barriers
        )
