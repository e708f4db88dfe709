"""Numba's CUDA simulator, one simulated thread at a time: deterministic, ~25x less CPU.

The simulator runs each block of a launch as one new Python thread per CUDA thread, all started
at once and left to the interpreter's scheduler, with a manager that scans them in a loop to
release a ``syncthreads()`` barrier once every live thread waits at it. On this project's
machines a thread costs 110-150 us to create and join, so a launch cost about 230 us per
simulated thread, and the order in which threads ran (hence what a racy kernel computed) changed
from run to run.

`install()` replaces the manager's ``run`` with a cooperative scheduler. The threads of a block
run one at a time, in CUDA's order (``threadIdx.x`` fastest, as warps are formed): each runs
until it ends or waits at a barrier, and once every live thread of the block waits there, they
are resumed in the order they arrived. A barrier means what it means in the simulator and on a
GPU: released when all the block's live threads reach it, threads that have ended not counted.
What a thread sees of ``cuda.threadIdx``, ``cuda.blockIdx``, ``laneid``, shared memory, atomics
and ``syncthreads_count/and/or`` is the simulator's own code, reading the same attributes of
``threading.current_thread()``; only who runs when changes.

The Python threads that carry simulated threads are kept in a pool and reused by later threads,
blocks and launches, so a kernel without barriers runs a whole block on one of them, and a block
needs as many as wait at one barrier at once (never more than the simulator started).

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

It applies only to Numba's simulator (``NUMBA_ENABLE_CUDASIM=1``), in the processes that launch
kernels there: the kernel worker, the notebook worker and the in-process backend. A Numba whose
simulator lacks the names it replaces is left alone and `install` returns False (the pinned
numba-cuda is checked by ``tests/unit/core/test_simulator.py``).
"""

from __future__ import annotations

import sys
import threading
from collections import deque
from typing import Any

from grader.core import device


def _kernel_module() -> Any:
    import numba.cuda.simulator.kernel as kernel  # lazy: only once the simulator is chosen

    return kernel


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
    if base is None or thread_base is None or dim3 is None or not _known_shape(base, kernelapi):
        return False
    pool = _Pool(_carrier_class(thread_base))

    class CooperativeBlockManager(base):  # type: ignore[misc, valid-type]  # the simulator's class
        """The simulator's block manager, its threads run one at a time by `_Block`."""

        cooperative = True

        def run(self, grid_point: Any, *args: Any) -> None:
            _Block(self, dim3, grid_point, args, pool).run()  # type: ignore[arg-type]

    kernel.BlockManager = CooperativeBlockManager
    _fill_new_arrays(kernelapi)
    return True


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
    wrong as on a GPU but the same each time. Dynamic shared memory is the simulator's own
    (zeroed). A shared array is still one per line of source and launch, as the simulator keys
    it; the caller's line is read from its frame, not a whole extracted stack."""
    shared, local = kernelapi.FakeCUDAShared, kernelapi.FakeCUDALocal
    if getattr(shared, "fills", False):
        return
    simulators_shared, simulators_local = shared.array, local.array

    def fresh(shape: Any, dtype: Any) -> Any:
        if isinstance(dtype, kernelapi.types.Type):
            dtype = kernelapi.numpy_support.as_dtype(dtype)
        array = kernelapi.np.empty(shape, dtype)
        array.reshape(-1).view("u1").fill(UNSET_BYTE)
        return array

    def shared_array(self: Any, shape: Any, dtype: Any, alignment: Any = None) -> Any:
        if shape == 0 or alignment is not None:  # dynamic, or refused: the simulator's own
            return simulators_shared(self, shape, dtype, alignment)
        caller = sys._getframe(1)
        key = (caller.f_code.co_filename, caller.f_lineno)
        found = self._allocations.get(key)
        if found is None:
            found = self._allocations[key] = fresh(shape, dtype)
        return found

    def local_array(self: Any, shape: Any, dtype: Any, alignment: Any = None) -> Any:
        if alignment is not None:  # refused: the simulator's own error
            return simulators_local(self, shape, dtype, alignment)
        return fresh(shape, dtype)

    shared.array, shared.fills = shared_array, True
    local.array = local_array


def _turn() -> Any:
    """A held lock: released to hand a party the turn, acquired by that party to wait for it
    (a lock may be released by a thread other than its holder; cheaper than a semaphore)."""
    lock = threading.Lock()
    lock.acquire()
    return lock


def _carrier_class(thread_base: type) -> type:
    """The pool's thread class: a subclass of the simulator's ``BlockThread``, so the simulator's
    ``syncthreads_count/and/or`` and its ``threading.current_thread()`` reads work unchanged."""

    class Carrier(thread_base):  # the simulator's class
        """A Python thread that runs simulated threads, one after another, for whichever block
        hands it the turn."""

        def __init__(self) -> None:
            threading.Thread.__init__(self, name="simulated-thread", daemon=True)
            self.turn = _turn()
            self.block: _Block | None = None
            self.abort = False

        def run(self) -> None:
            while True:
                self.turn.acquire()
                block = self.block
                if block is not None:
                    block.serve(self)

        def syncthreads(self) -> None:
            if self.abort:
                raise RuntimeError("abort flag set on syncthreads call")
            block = self.block
            assert block is not None, "syncthreads outside a simulated block"
            block.wait_at_barrier(self)
            if self.abort:
                raise RuntimeError("abort flag set on syncthreads clear")

    return Carrier


class _Pool:
    """Idle carriers, started on first need and kept for the process's life."""

    def __init__(self, carrier_class: type) -> None:
        self._carrier_class = carrier_class
        self._idle: list[Any] = []

    def take(self, block: _Block) -> Any:
        try:
            carrier = self._idle.pop()  # atomic, whichever thread holds a turn
        except IndexError:
            carrier = self._carrier_class()
            carrier.start()
        carrier.block = block
        return carrier

    def give_back(self, carrier: Any) -> None:
        carrier.block = None
        self._idle.append(carrier)


_START = object()  # `_Block._successor`: start the next thread not yet started
_LAUNCHER = object()  # `_Block._successor`: hand the turn back to the launching thread


class _Block:
    """One block of a launch. Exactly one party holds the turn at a time: the launching thread
    (in `run`) or one carrier (running a simulated thread). The holder that stops (its thread
    ended or waits at a barrier) hands the turn straight to the party `_successor` names."""

    def __init__(self, manager: Any, dim3: type, grid_point: Any, args: tuple, pool: _Pool):
        self._manager = manager
        self._dim3 = dim3
        self._args = args
        self._pool = pool
        self._block_idx = dim3(*grid_point)
        dims = (*tuple(manager._block_dim), 1, 1, 1)
        self._x, self._y, self._z = dims[:3]
        self._count = self._x * self._y * self._z
        self._next = 0  # the linear id of the next thread to start
        self._waiting: list[Any] = []  # carriers at the barrier, in arrival order
        self._ready: deque[Any] = deque()  # carriers past a released barrier, not yet resumed
        self._error: tuple[BaseException, Any] | None = None
        self._back = _turn()  # the launching thread's turn

    def run(self) -> None:
        """Run every thread of the block; raise the first thread's exception, as the simulator."""
        if self._count == 0:
            return
        self._pool.take(self).turn.release()
        self._back.acquire()
        if self._error is not None:
            self._abort()
            error, traceback = self._error
            raise error.with_traceback(traceback)

    def serve(self, carrier: Any) -> None:
        """On a carrier given the turn to start threads: run them one after another while
        threads are left to start, then free the carrier and hand the turn on."""
        while (successor := self._successor()) is _START:
            linear = self._next
            self._next += 1
            self._simulate(carrier, linear)
        self._pool.give_back(carrier)
        self._give(successor)

    def wait_at_barrier(self, carrier: Any) -> None:
        """On a carrier holding the turn: wait here until every live thread of the block has
        arrived and the threads that arrived before this one have run on."""
        self._waiting.append(carrier)
        successor = self._successor()
        if successor is carrier:  # the last to arrive, and the only one waiting
            return
        if successor is _START:
            try:
                successor = self._pool.take(self)
            except BaseException:
                self._waiting.remove(carrier)
                raise
        self._give(successor)
        carrier.turn.acquire()

    def _successor(self) -> Any:
        """Who runs next: a thread past the barrier, a thread not yet started, the barrier's
        first thread once every live thread waits there, else (done, or failed) the launcher."""
        if self._error is not None:
            return _LAUNCHER
        if self._ready:
            return self._ready.popleft()
        if self._next < self._count:
            return _START
        if self._waiting:
            self._ready, self._waiting = deque(self._waiting), []
            return self._ready.popleft()
        return _LAUNCHER

    def _give(self, successor: Any) -> None:
        (self._back if successor is _LAUNCHER else successor.turn).release()

    def _simulate(self, carrier: Any, linear: int) -> None:
        """One simulated thread, on `carrier`, with the attributes the simulator's API reads."""
        x, rest = linear % self._x, linear // self._x
        y, z = rest % self._y, rest // self._y
        carrier.threadIdx = self._dim3(x, y, z)
        carrier.blockIdx = self._block_idx
        carrier.thread_id = linear
        carrier._manager = self._manager
        carrier.debug = self._manager._debug
        carrier.abort = False
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

    def _abort(self) -> None:
        """Resume every thread still waiting with the abort flag set, one at a time, so that it
        unwinds (the simulator's rule); threads not yet started never start."""
        pending = [*self._ready, *self._waiting]
        self._ready, self._waiting = deque(), []
        for carrier in pending:
            carrier.abort = True
            carrier.turn.release()
            self._back.acquire()


def _located(exc: Exception, carrier: Any) -> BaseException:
    """The exception with the simulator's prefix naming the thread and block."""
    where = f"tid={list(carrier.threadIdx)} ctaid={list(carrier.blockIdx)}"
    message = where if str(exc) == "" else f"{where}: {exc}"
    try:
        return type(exc)(message)
    except Exception:  # noqa: BLE001  # a type that cannot be built from one message
        return exc
