"""`grader.core.simulator`: the simulator's block manager, yielding instead of spinning.

The replacement must be in use with the pinned numba-cuda (else grading is silently slower
again) and must keep what the simulator computes and raises: barriers, shared memory, a
thread's exception with its thread and block, and the abort of a block whose thread failed
before a barrier (which must not hang). Its speed is measured by `bench/run.py`, not here.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.core import device, simulator

pytestmark = pytest.mark.skipif(
    device.has_gpu(), reason="the simulator is what runs kernels only on a machine without a GPU"
)


cuda = None  # numba.cuda, set by the fixture: the simulator finds it among a kernel's globals


@pytest.fixture(scope="module", autouse=True)
def sim():
    global cuda
    device.prepare_numba()
    assert simulator.install(), "numba-cuda's simulator no longer has the BlockManager it replaces"
    from numba import cuda  # lazy: after prepare_numba



def test_the_yielding_manager_is_the_one_launches_use():
    import numba.cuda.simulator.kernel as kernel

    assert kernel.BlockManager.yields
    assert simulator.install()  # a second install keeps the one in place
    assert kernel.BlockManager.__mro__[1].__name__ == "BlockManager"


def test_barriers_and_shared_memory_give_the_simulators_results():
    import numba

    @cuda.jit
    def block_sums(x, out):
        tile = cuda.shared.array(64, numba.float32)
        t = cuda.threadIdx.x
        tile[t] = x[cuda.blockIdx.x * 64 + t]
        cuda.syncthreads()
        step = 32
        while step > 0:
            if t < step:
                tile[t] += tile[t + step]
            cuda.syncthreads()
            step //= 2
        if t == 0:
            out[cuda.blockIdx.x] = tile[0]

    x = np.arange(192, dtype=np.float32)
    out = np.zeros(3, dtype=np.float32)
    block_sums[3, 64](x, out)
    np.testing.assert_array_equal(out, x.reshape(3, 64).sum(axis=1))


def test_a_threads_exception_names_its_thread_and_block():
    @cuda.jit
    def past_the_end(x):
        x[cuda.grid(1)] = 1.0

    with pytest.raises(IndexError, match=r"tid=\[\d+, 0, 0\] ctaid=\[1, 0, 0\]"):
        past_the_end[2, 32](np.zeros(40, dtype=np.float32))


def test_a_failure_before_a_barrier_aborts_the_block():
    @cuda.jit
    def fails_then_waits(x):
        t = cuda.threadIdx.x
        if t == 3:
            x[100] = 1.0  # out of bounds: this thread never reaches the barrier
        cuda.syncthreads()
        x[t] = 2.0

    with pytest.raises(IndexError, match=r"tid=\[3, 0, 0\]"):
        fails_then_waits[1, 16](np.zeros(16, dtype=np.float32))


def test_nothing_is_replaced_without_the_simulator(monkeypatch):
    monkeypatch.setattr(device, "simulator_active", lambda: False)
    assert simulator.install() is False
