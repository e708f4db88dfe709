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

import bisect
import dis
import operator
import os
import sys
import threading
from types import CodeType, FrameType
from typing import Any

from grader.core.errors import SubmissionError
from grader.simt import cudaapi, memmodel, simulator

KERNEL_FILE = "<graded kernel>"  # the file name the kernel host compiles extracted source under
MAX_ACCESSES = 2_000_000  # a profiling launch is small; past this the recorder refuses


class TooManyAccesses(SubmissionError):
    """A profiled launch made more accesses than the recorder keeps (the kernel's doing: it
    reaches the trusted side as the kernel's error)."""


class Untraceable(SubmissionError):
    """The kernel reached memory by a path the recorder cannot place in warp requests (a
    whole-array method, a record field...): refused by name, with the kernel's line, rather
    than profiled as if that memory were never touched (docs/MEMORY_MODEL.md, "Every path to
    memory")."""


# ---- which dynamic instance of an instruction an access is


_HEADER_WINDOW = 4  # instructions between taking a loop's iterator and its header, at most


class _Loops:
    """The loops of one code object, read from its bytecode: every backward jump's target is
    a loop header, and the loop spans from it to the last jump back there."""

    __slots__ = ("spans", "_enclosing", "_starts", "_normal", "keys")

    def __init__(self, code: CodeType) -> None:
        ends: dict[int, int] = {}
        instructions = list(dis.get_instructions(code))
        self._starts = [ins.offset for ins in instructions]
        self._normal: dict[int, int] = {}
        # f_lasti -> (its instruction, a getter of the enclosing loops' counts, or None)
        self.keys: dict[int, tuple[int, Any]] = {}
        for ins in instructions:
            target = ins.argval
            if (
                (ins.opcode in dis.hasjrel or ins.opcode in dis.hasjabs)
                and type(target) is int
                and target <= ins.offset
            ):
                ends[target] = max(ends.get(target, target), ins.offset)
        self.spans = sorted(ends.items())  # outer loops first: their headers come first
        self._enclosing: dict[int, tuple[int, ...]] = {}

    def instruction(self, lasti: int) -> int:
        """The offset of the instruction a frame's ``f_lasti`` is in: a specialised
        instruction reports the end of its inline cache instead of its start."""
        found = self._normal.get(lasti)
        if found is None:
            found = self._normal[lasti] = self._starts[bisect.bisect_right(self._starts, lasti) - 1]
        return found

    def key_of(self, lasti: int) -> tuple[int, Any]:
        """What `_Frame.key` needs for `f_lasti`, worked out once per offset."""
        start = self.instruction(lasti)
        loops = self.enclosing(start)
        getter = operator.itemgetter(*loops) if loops else None
        found = self.keys[lasti] = (start, getter)
        return found

    def after(self, lasti: int) -> int | None:
        """The loop a ``for`` statement whose iterator is taken at `lasti` heads: its header
        comes within a few instructions (``GET_ITER``, or ``enumerate(...)``/``zip(...)``'s call
        and then ``GET_ITER``), or None (the range is iterated some other way)."""
        at = bisect.bisect_right(self._starts, lasti)
        near = set(self._starts[at : at + _HEADER_WINDOW])
        return next((i for i, (h, _) in enumerate(self.spans) if h in near), None)

    def enclosing(self, lasti: int) -> tuple[int, ...]:
        """The loops around the instruction at `lasti`, outermost first."""
        found = self._enclosing.get(lasti)
        if found is None:
            found = self._enclosing[lasti] = tuple(
                i for i, (h, e) in enumerate(self.spans) if h <= lasti <= e
            )
        return found


class _Frame:
    """The loops of one running call of kernel code that iterate over ``range``: the
    iteration each is in (-1 before its first), kept by the loops' own iterators."""

    __slots__ = ("loops", "counts")

    def __init__(self, loops: _Loops) -> None:
        self.loops = loops
        self.counts = [0] * len(loops.spans)

    def key(self, lasti: int) -> Any:
        """The instruction at `lasti` and the iteration of each loop around it."""
        found = self.loops.keys.get(lasti)
        if found is None:
            found = self.loops.key_of(lasti)
        start, getter = found
        return start if getter is None else (start, getter(self.counts))


class _CountingIterator:
    """A ``range``'s iterator in a loop of kernel code: each step is the loop's next
    iteration (the per-iteration cost is this one call)."""

    __slots__ = ("_it", "_counts", "_loop")

    def __init__(self, it: Any, counts: list[int], loop: int) -> None:
        self._it, self._counts, self._loop = it, counts, loop
        counts[loop] = -1

    def __iter__(self) -> _CountingIterator:
        return self

    def __next__(self) -> Any:
        value = next(self._it)
        self._counts[self._loop] += 1
        return value


class _Range:
    """What ``range(...)`` gives kernel code while a launch is recorded: the range itself in
    every respect, except that iterating it in a loop of kernel code counts the loop's
    iterations (`Recorder._frame_loops`); anywhere else it iterates as a range."""

    __slots__ = ("_range", "_recorder")

    def __init__(self, recorder: Recorder, *args: Any) -> None:
        self._range = range(*args)
        self._recorder = recorder

    def __iter__(self) -> Any:
        frame: Any = sys._getframe(1)
        if frame.f_code.co_filename != self._recorder._file:
            return iter(self._range)
        state = self._recorder._frame_loops(frame)
        loop = state.loops.after(state.loops.instruction(frame.f_lasti))
        if loop is None:
            return iter(self._range)
        return _CountingIterator(iter(self._range), state.counts, loop)

    def __len__(self) -> int:
        return len(self._range)

    def __getitem__(self, index: Any) -> Any:
        return self._range[index]

    def __contains__(self, value: Any) -> bool:
        return value in self._range

    def __reversed__(self) -> Any:
        return reversed(self._range)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._range, name)


def _devicearray() -> Any:
    from numba.cuda.simulator.cudadrv import devicearray  # lazy: after the simulator switch

    return devicearray


def _traced_class() -> type:
    """`TracedArray`, a subclass of the simulator's device array (built once numba is loaded)."""
    global _TRACED
    if _TRACED is None:
        base = _devicearray().FakeCUDAArray

        class TracedArray(_Views, base):  # type: ignore[misc, valid-type]  # the simulator's
            """A simulated device array whose element accesses are recorded."""

            def __init__(self, ary: Any, recorder: Recorder, name: str, offset: int) -> None:
                super().__init__(ary)
                self._recorder = recorder
                self._name = name
                self._offset = offset
                self._shape = ary.shape  # read on every access: kept as plain tuples
                self._strides = ary.strides
                dtype = ary.dtype
                self._elem = int(dtype.itemsize)
                self._unit = memmodel.access_unit(self._elem, dtype.kind, bool(dtype.fields))
                self._record = bool(dtype.fields)

            def __getitem__(self, index: Any) -> Any:
                value = self._ary[index]
                if type(value) in _VIEW_TYPES:
                    return self._view(value)
                self._recorder.access(self, index, memmodel.LOAD)
                return value

            def __setitem__(self, index: Any, value: Any) -> None:
                if _is_element(self._ary, index):
                    self._ary[index] = value
                    self._recorder.access(self, index, memmodel.STORE)
                    return
                self._refuse("a store to a slice (a[i:j] = ...)", _WHOLE_ARRAY)
                self._ary[index] = value

            def _view(self, view: Any) -> Any:
                start = (
                    view.__array_interface__["data"][0] - self._ary.__array_interface__["data"][0]
                )
                return TracedArray(view, self._recorder, self._name, self._offset + start)

        _TRACED = TracedArray
    return _TRACED


class _Views:
    """What `TracedArray` adds to the simulator's device array besides recording: views and
    aliases traced at their own offsets, every other path to memory refused by name
    (docs/MEMORY_MODEL.md, "Every path to memory")."""

    _ary: Any
    _recorder: Recorder
    _view: Any  # TracedArray's

    @property
    def T(self) -> Any:  # noqa: N802  # numpy's name
        return self._derived(".T", self._ary.T)

    def transpose(self, *axes: Any, **kw: Any) -> Any:
        return self._derived(".transpose()", self._ary.transpose(*axes, **kw))

    def reshape(self, *shape: Any, **kw: Any) -> Any:
        return self._derived(".reshape()", self._ary.reshape(*shape, **kw))

    def ravel(self, *args: Any, **kw: Any) -> Any:
        return self._derived(".ravel()", self._ary.ravel(*args, **kw))

    def view(self, *args: Any, **kw: Any) -> Any:
        return self._derived(".view()", self._ary.view(*args, **kw))

    def _derived(self, what: str, value: Any) -> Any:
        """A view of this array (traced at its offset in the same allocation), or, for
        a copy the kernel made, a refusal: writes to it would be lost on a GPU."""
        if isinstance(value, _VIEW_TYPES[0]) and _shares(value, self._ary):
            return self._view(value)
        self._refuse(what, "makes a copy of the array, not a view of its memory")
        return _devicearray().FakeCUDAArray(value)

    def _refuse(self, what: str, why: str) -> None:
        line = _kernel_line(self._recorder._file)
        if line is not None:
            raise Untraceable(
                f"line {line} of the kernel uses {what} on an array: it {why}, so the "
                "memory profile cannot count its accesses. Index the array's elements "
                "instead (see docs/MEMORY_MODEL.md, every path to memory)"
            )

    def __getattr__(self, name: str) -> Any:
        value = _devicearray().FakeCUDAArray.__getattr__(self, name)
        if name in _METADATA or name.startswith("__"):
            return value
        if name in ("real", "imag"):
            return self._derived(f".{name}", value)
        if name == "flat" and self._ary.flags.c_contiguous:  # element i of the flattening
            return self._derived(".flat", self._ary.reshape(-1))
        self._refuse(f".{name}", _WHOLE_ARRAY)
        return value

    def split(self, *args: Any, **kw: Any) -> Any:
        self._refuse(".split()", _WHOLE_ARRAY)
        return _devicearray().FakeCUDAArray.split(self, *args, **kw)

    def bind(self, *args: Any, **kw: Any) -> Any:
        self._refuse(".bind()", _WHOLE_ARRAY)
        return _devicearray().FakeCUDAArray.bind(self, *args, **kw)

    def copy_to_host(self, *args: Any, **kw: Any) -> Any:
        self._refuse(".copy_to_host()", _WHOLE_ARRAY)
        return _devicearray().FakeCUDAArray.copy_to_host(self, *args, **kw)

    def copy_to_device(self, *args: Any, **kw: Any) -> Any:
        self._refuse(".copy_to_device()", _WHOLE_ARRAY)
        return _devicearray().FakeCUDAArray.copy_to_device(self, *args, **kw)


_TRACED: type | None = None
_ABSENT = object()  # a name that was not there before the recording
_VIEW_TYPES: tuple[type, ...] = ()
# what a kernel may read of an array without touching its elements (Numba's array attributes)
_METADATA = frozenset({"shape", "strides", "ndim", "size", "dtype", "itemsize", "nbytes", "flags"})
_WHOLE_ARRAY = "reads or writes many elements in one call, which no warp request describes"
# between the kernel's line and the array: the simulator's wrappers and the sanitizer's, NumPy
_SIMT_DIR = os.path.dirname(__file__) + os.sep
_SITE_PACKAGES = os.sep + "site-packages" + os.sep


def _shares(view: Any, base: Any) -> bool:
    """Whether `view`'s elements lie in `base`'s memory (a view, not a copy)."""
    import numpy as np  # lazy: numba already imported it

    # a copy is another allocation: its bounds never overlap (the exact test can be slow)
    return bool(view.size == 0 or np.may_share_memory(view, base))


def _kernel_line(kernel_file: str) -> int | None:
    """The kernel's line that called into the array now (through the simulator's wrappers,
    the sanitizer's or NumPy's), or None when the grader's own code did."""
    frame: Any = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if name == kernel_file:
            return int(frame.f_lineno)
        if not name.startswith(_SIMT_DIR) and _SITE_PACKAGES not in name:
            return None
        frame = frame.f_back
    return None


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
        self._accesses: list[tuple[int, int, int, int, int]] = []
        self._instances: dict[Any, int] = {}  # dynamic instances, numbered from 1
        self._loops: dict[CodeType, _Frame] = {}  # per code: its loops (and a loop-less state)
        self._frames: dict[FrameType, _Frame] = {}  # kept until the launch ends
        self._kernel_code: CodeType | None = None
        self._flat: _Frame | None = None  # the kernel's one state when it has no loops
        self._arrays: dict[str, tuple[str, int, int]] = {}
        self._barriers: dict[int, int] = {}
        self._block_threads = -1  # threads of the block running now (`block`)
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
        self._patch_block_manager()
        return self

    def __exit__(self, *exc: object) -> None:
        simulator.observe(self._previous)
        for owner, name, original in reversed(self._restore):
            if original is _ABSENT:
                owner.pop(name, None)  # a name put into a kernel's globals
            elif isinstance(owner, dict):
                owner[name] = original
            else:
                setattr(owner, name, original)
        self._restore.clear()
        self._frames.clear()

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

    def block(self, block: tuple[int, int, int], threads: int) -> None:
        self._block_threads = threads

    def warp_synced(self, block: tuple[int, int, int], threads: tuple[int, ...]) -> None:
        """A syncwarp that every thread of a one-warp block met orders the whole block: a
        barrier of that block, as CUDA's `__syncwarp` is for a block of one warp."""
        if len(threads) == self._block_threads:
            self.barrier(block)

    def access(self, array: Any, index: Any, op: str) -> None:
        """One thread's access of one element of a traced array (on every access: kept lean)."""
        frame: Any = sys._getframe(2)
        while frame is not None and frame.f_code.co_filename != self._file:
            frame = frame.f_back
        if frame is None:  # not made by the kernel (the grader's own copy): not the kernel's
            return
        if array._record:
            array._refuse("a record (structured) array's element", "is copied byte by byte")
        thread: Any = threading.current_thread()  # the scheduler's carrier, a simulated thread
        raw = (frame.f_lineno, array._name, op, array._unit, array._elem)
        site = self._key_ids.get(raw)
        if site is None:
            site = self._new_site(raw)
        if frame.f_code is self._kernel_code:  # the common case, inline: see `_instance`
            state = self._flat or self._frames.get(frame) or self._frame_loops(frame)
            lasti = frame.f_lasti
            start, getter = state.loops.keys.get(lasti) or state.loops.key_of(lasti)
            key = start if getter is None else (start, getter(state.counts))
            instance = self._instances.get(key) or self._new_instance(key)
        else:
            instance = self._instance(frame)
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
        unit = array._unit
        if unit == array._elem:
            accesses.append((self._block_linear, thread.thread_id, site, offset, instance))
            return
        for part in range(0, array._elem, unit):  # Numba's instructions for one element
            accesses.append((self._block_linear, thread.thread_id, site, offset + part, instance))

    def _new_site(self, raw: tuple[int, str, str, int, int]) -> int:
        line, name, op, unit, item = raw
        space = self._arrays[name][0]
        site = self._key_ids[raw] = len(self._keys)
        self._keys.append(memmodel.SiteKey(line, name, space, op, unit, item))
        return site

    # ---- dynamic instances

    def _frame_loops(self, frame: FrameType) -> _Frame:
        """The loop state of one running call of kernel code (made on its first loop or access;
        kept until the launch ends, unless its code has no loops)."""
        state = self._frames.get(frame)
        if state is None:
            code = frame.f_code
            shared = self._loops.get(code)
            if shared is None:
                shared = self._loops[code] = _Frame(_Loops(code))
            if not shared.loops.spans:  # no loops: one state for every call, none kept
                return shared
            state = self._frames[frame] = _Frame(shared.loops)
        return state

    def _instance(self, frame: Any) -> Any:
        """The dynamic instance of the instruction `frame` (kernel code) runs now, numbered
        from 1: the instruction, the iteration of every ``range`` loop around it, and for a
        device function the instance of the call that made it. Loops over anything else
        (``while``, an array) are not counted: their accesses pair each lane's n-th one."""
        state = self._frames.get(frame)
        if state is None:
            state = self._frame_loops(frame)
        key = state.key(frame.f_lasti)
        if frame.f_code is not self._kernel_code:  # a device function: which call of it
            caller = frame.f_back
            while caller is not None and caller.f_code.co_filename != self._file:
                caller = caller.f_back
            key = ("call", self._instance(caller) if caller is not None else 0, key)
        return self._instances.get(key) or self._new_instance(key)

    def _new_instance(self, key: Any) -> int:
        found = self._instances[key] = len(self._instances) + 1
        return found

    def _patch_block_manager(self) -> None:
        """Learn the kernel from the simulator's block manager, and give its code a ``range``
        whose loops count their iterations (`_Range`), in the kernel's globals for the
        launch."""
        from numba.cuda.simulator import kernel  # lazy: after the simulator switch

        base = kernel.BlockManager
        recorder = self

        class RecordingBlockManager(base):  # type: ignore[misc, valid-type]  # the simulator's
            def __init__(self, f: Any, *rest: Any) -> None:
                super().__init__(f, *rest)
                recorder._kernel_started(f)

        self._restore.append((kernel, "BlockManager", base))
        kernel.BlockManager = RecordingBlockManager  # type: ignore[misc]  # restored on exit

    def _kernel_started(self, f: Any) -> None:
        code = getattr(f, "__code__", None)
        if code is None or code is self._kernel_code:
            return
        self._kernel_code = code
        shared = self._loops[code] = self._loops.get(code) or _Frame(_Loops(code))
        self._flat = None if shared.loops.spans else shared
        space = f.__globals__
        if "range" not in space:
            recorder = self

            def counting_range(*args: Any) -> _Range:
                return _Range(recorder, *args)

            space["range"] = counting_range
            self._restore.append((space, "range", _ABSENT))

    def _block_id(self, block: tuple[int, int, int]) -> int:
        gx, gy, _ = self._grid
        return block[0] + gx * (block[1] + gy * block[2])

    # ---- atomics and constants

    def _patch_atomics_and_constants(self) -> None:
        from numba.cuda.simulator import kernelapi  # lazy: after the simulator switch

        recorder = self
        atomic = kernelapi.FakeCUDAAtomic
        for name in cudaapi.ATOMICS:
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
