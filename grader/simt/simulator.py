"""Numba's CUDA simulator, one simulated thread at a time on one Python thread: deterministic,
any legal block, and a fraction of the simulator's CPU per simulated thread.

The simulator runs each block of a launch as one new Python thread per CUDA thread, all started
at once and left to the interpreter's scheduler, with a manager that scans them in a loop to
release a ``syncthreads()`` barrier once every live thread waits at it. A thread costs 110-150 us
to create and join here, the order in which threads ran (hence what a racy kernel computed)
changed from run to run, and a block of more threads than the sandbox's process limit
(``[limits] processes``) could not start at all once a barrier held them all alive.

`install()` replaces the manager's ``run`` with a cooperative scheduler. A block's simulated
threads are greenlets (the `greenlet` package: stack switching inside one Python thread), run one
at a time in CUDA's order (``threadIdx.x`` fastest, as warps are formed): each runs until it ends
or waits at a barrier, and once every live thread of the block waits there, they are resumed in
the order they arrived. A barrier means what it means in the simulator and on a GPU: released
when all the block's live threads reach it, threads that have ended not counted. What a thread
sees of ``cuda.threadIdx``, ``cuda.blockIdx``, ``laneid``, shared memory, atomics and
``syncthreads_count/and/or`` is the simulator's own code, reading the same attributes of
``threading.current_thread()``: one Python thread (the carrier, a subclass of the simulator's
``BlockThread``) runs every block, and takes on the attributes of whichever simulated thread it
switches to. So a block of 1,024 threads with barriers needs one Python thread, not 1,024.

Consequences, all on purpose:
- The same kernel and inputs always run in the same order, so a race (a missing barrier) gives
  the same wrong result on every run: a regrade gives the same score.
- A thread's exception is reported as the simulator reports it (its ``tid=[...] ctaid=[...]``
  prefix, the original traceback), then every thread waiting at a barrier is resumed with the
  simulator's abort flag, so it unwinds, and the launch raises. Threads not yet started are not
  started.
- One thread that waits, spinning, for another thread's write without a barrier between them
  never lets that thread run: the launch hangs, and the worker's time limit ends it as it ends any
  other endless kernel. CUDA promises no such progress either before Volta.
- Shared memory is CUDA's, not the simulator's: one array per declaration, fresh for every
  block (static and dynamic), and ``syncthreads_count/and/or`` count live threads only.
- Warp primitives (`grader.simt.warps`) are gatherings of the lanes their mask names: a lane
  waits at one as at a barrier of those lanes only; a mask that can never be met stops the
  launch with the line and lanes.
- Observers (`grader.simt.memtrace`) learn which simulated thread runs and when a barrier is
  released through `observe`; the scheduler itself records nothing.

It applies only to Numba's simulator (``NUMBA_ENABLE_CUDASIM=1``), in the processes that launch
kernels there: the kernel worker, the notebook worker and the in-process backend. A Numba whose
simulator lacks the names it replaces, or an interpreter without greenlet, is left alone and
`install` returns False (the pinned numba-cuda is checked by ``tests/unit/simt/test_simulator.py``).
"""

from __future__ import annotations

import sys
import threading
from collections import deque
from typing import Any

from grader.core import device
from grader.simt import cudaapi, warps


def _kernel_module() -> Any:
    import numba.cuda.simulator.kernel as kernel  # lazy: only once the simulator is chosen

    return kernel


def _greenlet() -> Any:
    try:
        import greenlet  # type: ignore[import-untyped]  # lazy: only simulating processes load it
    except ImportError:
        return None
    return greenlet


def install() -> bool:
    """Use the cooperative scheduler for every later simulated launch in this process; whether
    it is in use (False without the simulator, or with a simulator of another shape)."""
    if not device.simulator_active():
        return False
    kernel = _kernel_module()
    base = getattr(kernel, "BlockManager", None)
    if getattr(base, "cooperative", False):
        return True
    thread_base = getattr(kernel, "BlockThread", None)
    dim3 = getattr(kernel, "Dim3", None)
    kernelapi = _kernelapi_module()
    greenlet = _greenlet()
    if (
        base is None
        or thread_base is None
        or dim3 is None
        or greenlet is None
        or not _known_shape(base, kernelapi)
    ):
        return False
    pool = _Pool(_carrier_class(thread_base))

    class CooperativeBlockManager(base):  # type: ignore[misc, valid-type]  # the simulator's class
        """The simulator's block manager, its threads run one at a time by `_Block`."""

        cooperative = True

        def run(self, grid_point: Any, *args: Any) -> None:
            _Block(self, dim3, greenlet, grid_point, args).run(pool)  # type: ignore[arg-type]

    kernel.BlockManager = CooperativeBlockManager
    _fill_new_arrays(kernelapi)
    _add_warp_primitives(kernelapi.FakeCUDAModule)
    cudaapi.install(kernelapi.FakeCUDAModule, kernelapi)
    from grader.simt import sanitizer  # lazy: the sanitizer observes this module's scheduler

    sanitizer.attach()
    return True


def _add_warp_primitives(module_class: Any) -> None:
    """Give the simulator's ``cuda`` every warp-level primitive (`grader.simt.warps`), each a
    gathering of the lanes its mask names, run by the scheduler."""

    def gathering(op: str, arity: int) -> Any:
        def primitive(self: Any, mask: Any = warps.FULL, *args: Any) -> Any:
            if len(args) != arity:
                raise TypeError(f"cuda.{op} takes {arity + 1} arguments")
            value = None if arity == 0 else args[0] if arity == 1 else args
            line = sys._getframe(1).f_lineno
            carrier: Any = threading.current_thread()  # the scheduler's carrier
            return carrier.gather(op, mask, value, line)

        primitive.__name__ = op
        return primitive

    for op in warps.GATHERINGS:
        arity = 0 if op == "syncwarp" else 2 if op in warps.SHUFFLES else 1
        setattr(module_class, op, gathering(op, arity))

    def activemask(self: Any) -> int:
        caller = sys._getframe(1)
        carrier: Any = threading.current_thread()
        return int(carrier.activemask((caller.f_code, caller.f_lasti)))

    def lanemask_lt(self: Any) -> int:
        carrier: Any = threading.current_thread()
        return warps.lanemask_lt(carrier.thread_id)

    module_class.activemask = activemask
    module_class.lanemask_lt = lanemask_lt


def _known_shape(manager_class: Any, kernelapi: Any) -> bool:
    """Whether this simulator has the attributes the replacement reads (those of the pinned
    numba-cuda): else the simulator's own manager stays, slower but right."""
    try:
        manager = manager_class(lambda: None, (1, 1, 1), (1, 1, 1), False)
        shared = kernelapi.FakeCUDAShared(0)
    except Exception:  # noqa: BLE001  # another constructor: another simulator
        return False
    return (
        all(hasattr(manager, name) for name in ("_f", "_block_dim", "_debug", "block_state"))
        and isinstance(getattr(shared, "_allocations", None), dict)
        and all(hasattr(kernelapi, name) for name in ("FakeCUDALocal", "types", "np"))
        and hasattr(kernelapi, "numpy_support")
    )


def _kernelapi_module() -> Any:
    import numba.cuda.simulator.kernelapi as kernelapi  # lazy: as `_kernel_module`

    return kernelapi


UNSET_BYTE = 0xFF  # what fresh shared and local memory holds: NaN in a float, -1 in an int


def _fill_new_arrays(kernelapi: Any) -> None:
    """Fresh ``cuda.shared.array`` and ``cuda.local.array`` memory holds `UNSET_BYTE` in every
    byte instead of whatever ``np.empty`` found: a kernel that reads memory no thread wrote
    (a missing barrier, an accumulator never zeroed) reads the same NaN or -1 on every run, as
    wrong as on a GPU but the same each time.

    Shared memory is CUDA's: one array per declaration (the call's file, line and place in the
    line, so ``a, b = cuda.shared.array(...), cuda.shared.array(...)`` are two arrays; a
    declaration run again, in a loop, is the same array), fresh for every block (`_Block` clears
    the launch's allocations before a block starts), and the dynamic shared memory of the
    launch's configuration (``cuda.shared.array(0, dtype)``: every declaration views the same
    bytes, as ``extern __shared__``) fresh per block too, filled the same way. An observer
    (`observe`) and the sanitizer see every new shared array, static and dynamic alike."""
    shared, local = kernelapi.FakeCUDAShared, kernelapi.FakeCUDALocal
    if getattr(shared, "fills", False):
        return
    simulators_shared, simulators_local = shared.array, local.array

    def dtype_of(dtype: Any) -> Any:
        return _dtype(kernelapi, dtype)

    def fresh(shape: Any, dtype: Any) -> Any:
        return _fresh(kernelapi, shape, dtype)

    def shared_array(self: Any, shape: Any, dtype: Any, alignment: Any = None) -> Any:
        if alignment is not None:  # refused: the simulator's own error
            return simulators_shared(self, shape, dtype, alignment)
        caller = sys._getframe(1)
        site = (caller.f_code.co_filename, caller.f_lineno, caller.f_lasti)
        found = self._allocations.get(site)
        if found is None:
            line = site[:2]
            ordinal = self.__dict__.setdefault("_per_line", {}).get(line, 0)
            self._per_line[line] = ordinal + 1
            key = (site[0], site[1], ordinal)
            if shape == 0:  # dynamic: a view of the block's dynamic shared bytes
                item = dtype_of(dtype)
                count = self._dynshared_size // item.itemsize
                found = kernelapi.np.frombuffer(self._dynshared.data, dtype=item, count=count)
            else:
                found = fresh(shape, dtype)
            if _observer is not None:
                found = _observer.shared_array(found, key)
            if _sanitizer is not None:
                found = _sanitizer.shared_array(found, key)
            self._allocations[site] = found
        return found

    def local_array(self: Any, shape: Any, dtype: Any, alignment: Any = None) -> Any:
        if alignment is not None:  # refused: the simulator's own error
            return simulators_local(self, shape, dtype, alignment)
        if _sanitizer is not None:
            return _sanitizer.local_array(fresh(shape, dtype), sys._getframe(1).f_lineno)
        return fresh(shape, dtype)

    shared.array, shared.fills = shared_array, True
    local.array = local_array


def _dtype(kernelapi: Any, dtype: Any) -> Any:
    if isinstance(dtype, kernelapi.types.Type):
        return kernelapi.numpy_support.as_dtype(dtype)
    return kernelapi.np.dtype(dtype)


def _fresh(kernelapi: Any, shape: Any, dtype: Any) -> Any:
    """New memory of `shape` and `dtype`, every byte `UNSET_BYTE`."""
    array = kernelapi.np.empty(shape, _dtype(kernelapi, dtype))
    array.reshape(-1).view("u1").fill(UNSET_BYTE)
    return array


def fresh_shared(shared: Any) -> None:
    """A block's shared memory as a GPU gives it: no array of an earlier block, and dynamic
    shared bytes set to `UNSET_BYTE` (the simulator zeroes them once per launch)."""
    shared._allocations.clear()
    shared.__dict__["_per_line"] = {}
    dynamic = getattr(shared, "_dynshared", None)
    if dynamic is not None and dynamic.size:
        dynamic.view("u1").fill(UNSET_BYTE)


def shared_name(key: tuple) -> str:
    """How the tracer and the sanitizer name a shared array: ``shared@LINE``, and the second
    declaration on one line ``shared@LINE.1`` (and so on)."""
    return f"shared@{key[1]}" if len(key) < 3 or not key[2] else f"shared@{key[1]}.{key[2]}"


class Observer:
    """What a scheduler's observer is told (`grader.simt.memtrace.Recorder` is one). The default
    methods do nothing, so an observer overrides only what it needs."""

    def shared_array(self, array: Any, key: tuple[str, int, int]) -> Any:
        """A block's new shared array, declared at `key` (file, line, which declaration of the
        line: 0 for the first; `shared_name`): what the kernel gets."""
        return array

    def barrier(self, block: tuple[int, int, int]) -> None:
        """A barrier of `block` released (every live thread of the block waited at it)."""

    def warp_synced(self, block: tuple[int, int, int], threads: tuple[int, ...]) -> None:
        """A ``syncwarp`` of `block` met: `threads` (linear ids) are ordered from here on."""

    def block(self, block: tuple[int, int, int], threads: int) -> None:
        """`block` (of `threads` threads) is about to run, on fresh shared memory."""

    def barrier_sites(
        self, block: tuple[int, int, int], threads: list[int], sites: list[Any]
    ) -> None:
        """A barrier about to be released: the call site each waiting thread waits at."""


_observer: Observer | None = None
_sanitizer: Any = None  # `grader.simt.sanitizer`'s Observer (with `base`, `gid`), once attached


def observe(observer: Observer | None) -> Observer | None:
    """Tell `observer` about every later simulated launch in this process (None: stop); the
    previous one is returned, so a caller can put it back."""
    global _observer
    previous, _observer = _observer, observer
    return previous


def _turn() -> Any:
    """A held lock: released to hand a party the turn, acquired by that party to wait for it
    (a lock may be released by a thread other than its holder; cheaper than a semaphore)."""
    lock = threading.Lock()
    lock.acquire()
    return lock


class _Collectives:
    """A carrier's barriers and warp primitives (the simulator's API calls them on
    ``threading.current_thread()``): each waits in the running block's scheduler."""

    abort: bool
    block: Any
    thread_id: int

    def syncthreads(self) -> None:  # the most frequent: `_barrier` inline
        if self.abort:
            raise RuntimeError("abort flag set on syncthreads call")
        if _sanitizer is None:
            self.block.wait_at_barrier(None)
        else:
            caller = sys._getframe(2)
            self.block.wait_at_barrier((caller.f_code, caller.f_lasti, caller.f_lineno))
        if self.abort:
            raise RuntimeError("abort flag set on syncthreads clear")

    def syncthreads_count(self, value: Any) -> int:
        return sum(self._vote(value, sys._getframe(2)))

    def syncthreads_and(self, value: Any) -> int:
        return int(all(self._vote(value, sys._getframe(2))))

    def syncthreads_or(self, value: Any) -> int:
        return int(any(self._vote(value, sys._getframe(2))))

    def _vote(self, value: Any, caller: Any) -> Any:
        """A barrier with a predicate: the predicates of the block's live threads (those
        that ended are not counted, as on a GPU; the simulator counted their stale ones)."""
        block = self.block
        assert block is not None, "syncthreads outside a simulated block"
        block.votes.append(bool(value))
        self._barrier(caller)
        return block.released_votes

    def _barrier(self, caller: Any) -> None:
        if self.abort:
            raise RuntimeError("abort flag set on syncthreads call")
        block = self.block
        assert block is not None, "syncthreads outside a simulated block"
        block.wait_at_barrier((caller.f_code, caller.f_lasti, caller.f_lineno))
        if self.abort:
            raise RuntimeError("abort flag set on syncthreads clear")

    def gather(self, op: str, mask: Any, value: Any, line: int) -> Any:
        """A warp primitive (`grader.simt.warps`): wait for the mask's lanes, then the
        value this lane gets."""
        return self._resumed(self._block().gather(op, mask, value, line))

    def activemask(self, site: Any) -> int:
        """``activemask()`` at `site`: the lanes of this warp there at the same time."""
        return int(self._resumed(self._block().wait_active(site)))

    def _block(self) -> _Block:
        if self.abort:
            raise RuntimeError("abort flag set on a warp primitive")
        assert self.block is not None, "a warp primitive outside a simulated block"
        return self.block

    def _resumed(self, result: Any) -> Any:
        if self.abort:
            raise RuntimeError("abort flag set on a warp primitive")
        return result


def _carrier_class(thread_base: type) -> type:
    """The pool's thread class: a subclass of the simulator's ``BlockThread``, so the simulator's
    ``syncthreads_count/and/or`` and its ``threading.current_thread()`` reads work unchanged."""

    class Carrier(_Collectives, thread_base):  # the simulator's class
        """The Python thread that runs blocks, a simulated thread at a time, each a greenlet."""

        def __init__(self) -> None:
            threading.Thread.__init__(self, name="simulated-threads", daemon=True)
            self.turn = _turn()
            self.block: _Block | None = None
            self.abort = False

        def run(self) -> None:
            while True:
                self.turn.acquire()
                block = self.block
                if block is not None:
                    block.serve(self)

    return Carrier


class _Pool:
    """Idle carriers, started on first need and kept for the process's life (one, unless
    blocks are launched from several Python threads at once)."""

    def __init__(self, carrier_class: type) -> None:
        self._carrier_class = carrier_class
        self._idle: list[Any] = []

    def take(self) -> Any:
        try:
            return self._idle.pop()  # atomic
        except IndexError:
            carrier = self._carrier_class()
            carrier.start()
            return carrier

    def give_back(self, carrier: Any) -> None:
        carrier.block = None
        self._idle.append(carrier)


class _Thread:
    """One simulated thread: its place in the block, the greenlet it runs in, its abort flag."""

    __slots__ = ("index", "linear", "greenlet", "abort", "result")

    def __init__(self, index: Any, linear: int, greenlet: Any) -> None:
        self.index = index
        self.linear = linear
        self.greenlet = greenlet
        self.abort = False
        self.result: Any = None  # what a warp primitive handed this thread


class _Block:
    """One block of a launch, run on a carrier. The carrier's own greenlet (the hub) schedules;
    a worker greenlet runs simulated threads one after another, and one that waits at a barrier
    keeps its worker until the barrier is released, so the hub starts another worker for the
    threads after it. A block without barriers runs in one worker; one whose threads all wait
    at a barrier needs a worker per thread (a greenlet costs a few microseconds, not a thread)."""

    def __init__(
        self, manager: Any, dim3: type, greenlet: Any, grid_point: Any, args: tuple
    ) -> None:
        self._manager = manager
        self._dim3 = dim3
        self._greenlet = greenlet
        self._args = args
        self._block_idx = dim3(*grid_point)
        dims = (*tuple(manager._block_dim), 1, 1, 1)
        self._x, self._y, self._z = dims[:3]
        self._count = self._x * self._y * self._z
        self._next = 0  # the linear id of the next thread to start
        self._waiting: list[_Thread] = []  # at the barrier, in arrival order
        self._sites: list[Any] = []  # the barrier call each waiting thread waits at
        self.votes: list[bool] = []  # syncthreads_count/and/or predicates of this barrier
        self.released_votes: list[bool] = []  # those of the barrier last released
        self._ready: deque[_Thread] = deque()  # past a released barrier, not yet resumed
        self._room = warps.WarpRoom(self._count)  # the warps' gatherings
        self._active: list[tuple[int, _Thread, Any]] = []  # at activemask(), with the call site
        self._current: _Thread | None = None
        self._error: tuple[BaseException, Any] | None = None
        self._hub: Any = None
        self._carrier: Any = None
        self._done = _turn()  # the launching thread's turn

    def run(self, pool: _Pool) -> None:
        """On the launching thread: run every thread of the block on a carrier; raise the first
        thread's exception, as the simulator does."""
        if self._count == 0:
            return
        context = _kernel_module()._get_kernel_context()
        if context is not None:
            fresh_shared(context.shared)
        for party in (_observer, _sanitizer):
            if party is not None:
                party.block(tuple(self._block_idx), self._count)
        carrier = pool.take()
        carrier.block = self
        carrier.turn.release()
        self._done.acquire()
        pool.give_back(carrier)
        if self._error is not None:
            error, traceback = self._error
            raise error.with_traceback(traceback)

    def serve(self, carrier: Any) -> None:
        """On the carrier: the hub's loop, until every thread ended or one failed."""
        self._carrier, self._hub = carrier, self._greenlet.getcurrent()
        carrier.blockIdx = self._block_idx
        carrier._manager = self._manager
        carrier.debug = self._manager._debug
        try:
            while self._error is None:
                if self._ready:  # past a released barrier, in arrival order
                    self._switch(self._ready.popleft())
                elif self._next < self._count:  # threads not yet started: a worker starts them
                    self._greenlet.greenlet(self._work).switch()
                elif self._active:  # nothing else runs: the lanes at each activemask() meet
                    self._resolve_active()
                elif self._room.pending:  # a mask names lanes that never arrive
                    stuck = self._room.stuck() or warps.WarpError("a warp primitive never met")
                    self._error = (stuck, None)
                elif self._waiting:  # every live thread waits: release the barrier
                    self._release()
                else:
                    break
            self._abort()
        except BaseException as exc:  # noqa: BLE001  # the scheduler's own failure fails the launch
            if self._error is None:
                self._error = (exc, exc.__traceback__)
        finally:
            self._current = None
            self._done.release()

    def wait_at_barrier(self, site: Any = None) -> None:
        """In a simulated thread's worker: wait at the barrier call `site` until every live
        thread of the block has arrived and the threads that arrived before this one have run
        on."""
        thread = self._current
        assert thread is not None, "a barrier outside a simulated thread"
        self._waiting.append(thread)
        self._sites.append(site)
        self._hub.switch()

    def _release(self) -> None:
        """Every live thread waits at a barrier: release them, in arrival order."""
        block = tuple(self._block_idx)
        if _observer is not None:
            _observer.barrier(block)
        if _sanitizer is not None:
            sites = self._sites
            if sites.count(sites[0]) != len(sites):  # threads at different barrier calls
                _sanitizer.barrier_sites(block, [t.linear for t in self._waiting], sites)
            _sanitizer.barrier(block)
        self.released_votes, self.votes = self.votes, []
        self._ready, self._waiting, self._sites = deque(self._waiting), [], []

    def gather(self, op: str, mask: Any, value: Any, line: int) -> Any:
        """In a simulated thread's worker: arrive at a warp primitive; wait until every lane of
        the mask has; what this thread gets (the lanes resume in lane order)."""
        thread = self._current
        assert thread is not None, "a warp primitive outside a simulated thread"
        complete = self._room.arrive(thread.linear, thread, op, mask, value, line)
        if complete is None:
            self._hub.switch()
            return thread.result
        for lane, result in warps.results(complete).items():
            complete.threads[lane].result = result
        if op == "syncwarp":
            for party in (_observer, _sanitizer):
                if party is not None:
                    party.warp_synced(
                        tuple(self._block_idx), tuple(t.linear for t in complete.threads.values())
                    )
        self._ready.extend(t for t in complete.threads.values() if t is not thread)
        return thread.result

    def wait_active(self, site: Any) -> int:
        """In a simulated thread's worker: ``activemask()`` (resolved once nothing else runs)."""
        thread = self._current
        assert thread is not None, "activemask outside a simulated thread"
        self._active.append((thread.linear, thread, site))
        self._hub.switch()
        return int(thread.result)

    def _resolve_active(self) -> None:
        arrivals, self._active = sorted(self._active, key=lambda a: a[0]), []
        masks = warps.active_masks(arrivals)
        for linear, thread, _ in arrivals:
            thread.result = masks[linear]
            self._ready.append(thread)

    def _work(self) -> None:
        """A worker greenlet: start threads one after another while threads are left to start
        and none is ready past a barrier (CUDA's order, as the hub would choose)."""
        worker = self._greenlet.getcurrent()
        while self._error is None and not self._ready and self._next < self._count:
            linear = self._next
            self._next += 1
            x, rest = linear % self._x, linear // self._x
            thread = _Thread(self._dim3(x, rest % self._y, rest // self._y), linear, worker)
            self._enter(thread)
            self._simulate()

    def _enter(self, thread: _Thread) -> None:
        """Give the carrier `thread`'s identity (what the simulator's API reads)."""
        carrier = self._carrier
        carrier.threadIdx = thread.index
        carrier.thread_id = thread.linear
        carrier.abort = thread.abort
        self._current = thread
        if _sanitizer is not None:
            _sanitizer.gid = _sanitizer.base + thread.linear

    def _switch(self, thread: _Thread) -> None:
        """From the hub: resume `thread` where it waits, until it ends or waits again."""
        self._enter(thread)
        thread.greenlet.switch()

    def _simulate(self) -> None:
        """The current simulated thread's body, in its worker (the carrier holds its identity)."""
        carrier = self._carrier
        linear = carrier.thread_id
        try:
            if carrier.debug:
                import numpy as np  # lazy: numba already imported it

                with np.errstate(divide="raise"):
                    self._manager._f(*self._args)
            else:
                self._manager._f(*self._args)
        except Exception as exc:  # noqa: BLE001  # a kernel's error, reported as the simulator does
            if not carrier.abort and self._error is None:
                self._error = (_located(exc, carrier), exc.__traceback__)
        except BaseException:  # noqa: BLE001,S110  # SystemExit and kin end the thread, as there
            pass
        self._room.end(linear)

    def _abort(self) -> None:
        """Resume every thread still waiting with the abort flag set, one at a time, so that it
        unwinds (the simulator's rule); threads not yet started never start."""
        pending = [
            *self._ready,
            *self._waiting,
            *self._room.waiting_threads(),
            *(a[1] for a in self._active),
        ]
        self._ready, self._waiting, self._active, self._sites = deque(), [], [], []
        self._room.pending.clear()
        for thread in pending:
            thread.abort = True
            self._switch(thread)


def _located(exc: Exception, carrier: Any) -> BaseException:
    """The exception with the simulator's prefix naming the thread and block (a `WarpError`
    as it is: it names its lanes, and the sanitizer reads its fields)."""
    if isinstance(exc, warps.WarpError):
        return exc
    where = f"tid={list(carrier.threadIdx)} ctaid={list(carrier.blockIdx)}"
    message = where if str(exc) == "" else f"{where}: {exc}"
    try:
        return type(exc)(message)
    except Exception:  # noqa: BLE001  # a type that cannot be built from one message
        return exc
