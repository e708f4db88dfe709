"""`grader.simt.simulator`: the simulator's blocks, run one simulated thread at a time.

The replacement must be in use with the pinned numba-cuda (else grading is silently slower
again) and must keep what the simulator computes and raises: barriers (threads that ended not
counted), shared memory, ``syncthreads_count``, a thread's exception with its thread and block,
and the abort of a block whose thread failed before a barrier (which must not hang, nor leave
the next launch stuck). What it adds is asserted too: CUDA's thread order, the same result for
a racy kernel on every run, and a block of any legal size run on one Python thread.
Its speed is measured by `bench/run.py`, not here.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from grader.core import device
from grader.simt import simulator

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


def test_the_cooperative_manager_is_the_one_launches_use():
    import numba.cuda.simulator.kernel as kernel

    assert kernel.BlockManager.cooperative
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


def test_threads_run_in_cudas_order_x_fastest():
    @cuda.jit
    def arrival(counter, order):
        t = cuda.threadIdx.x + cuda.blockDim.x * (
            cuda.threadIdx.y + cuda.blockDim.y * cuda.threadIdx.z
        )
        order[t] = cuda.atomic.add(counter, 0, 1)

    counter = np.zeros(1, dtype=np.int64)
    order = np.full(4 * 3 * 2, -1, dtype=np.int64)
    arrival[1, (4, 3, 2)](counter, order)
    np.testing.assert_array_equal(order, np.arange(24))


def test_a_race_gives_the_same_result_on_every_run():
    import numba

    @cuda.jit
    def reversed_without_barrier(x, out):
        tile = cuda.shared.array(64, numba.float32)
        t = cuda.threadIdx.x
        tile[t] = x[t]
        out[t] = tile[63 - t]  # no syncthreads(): reads what the others may not have written

    x = np.arange(64, dtype=np.float32)
    results = []
    for _ in range(5):
        out = np.zeros(64, dtype=np.float32)
        reversed_without_barrier[1, 64](x, out)
        results.append(out)
    # the first half reads tile slots not yet written: the unset bytes, NaN in a float32
    assert np.isnan(results[0][:32]).all() and (results[0][32:] == x[31::-1]).all()
    for other in results[1:]:
        np.testing.assert_array_equal(other, results[0])


def test_threads_that_ended_do_not_hold_up_a_barrier():
    @cuda.jit
    def half_return(x, out):
        t = cuda.threadIdx.x
        if t % 2:
            return
        x[t] = t
        cuda.syncthreads()
        out[t] = x[(t + 2) % 32]

    x = np.zeros(32, dtype=np.float32)
    out = np.full(32, -1.0, dtype=np.float32)
    half_return[1, 32](x, out)
    np.testing.assert_array_equal(out[::2], (np.arange(0, 32, 2) + 2) % 32)
    np.testing.assert_array_equal(out[1::2], np.full(16, -1.0))


def test_syncthreads_count_sees_every_thread():
    @cuda.jit
    def count_odd(out):
        t = cuda.threadIdx.x
        out[t] = cuda.syncthreads_count(t % 2)

    out = np.zeros(48, dtype=np.int32)
    count_odd[1, 48](out)
    np.testing.assert_array_equal(out, np.full(48, 24))


def test_any_legal_block_runs_on_one_python_thread():
    """A block of 1,024 threads that all wait at barriers: greenlets, not Python threads, so
    the sandbox's process limit (64 by default) does not cap the block."""
    import numba

    @cuda.jit
    def block_sums(x, out):
        tile = cuda.shared.array(1024, numba.float32)
        t = cuda.threadIdx.x + cuda.blockDim.x * cuda.threadIdx.y
        size = cuda.blockDim.x * cuda.blockDim.y
        tile[t] = x[cuda.blockIdx.x * size + t]
        cuda.syncthreads()
        step = size // 2
        while step > 0:
            if t < step:
                tile[t] += tile[t + step]
            cuda.syncthreads()
            step //= 2
        if t == 0:
            out[cuda.blockIdx.x] = tile[0]

    x = np.arange(2048, dtype=np.float32) % 7
    out = np.zeros(2, dtype=np.float32)
    block_sums[2, 1024](x, out)  # the first launch may start the one carrier
    before = threading.active_count()
    for block in ((1024, 1), (32, 32), (256, 4)):
        out[:] = 0
        block_sums[2, block](x, out)
        np.testing.assert_array_equal(out, x.reshape(2, 1024).sum(axis=1))
    assert threading.active_count() == before


def test_after_an_aborted_block_the_next_launch_runs():
    @cuda.jit
    def fails_at_the_second_barrier(x, bad):
        t = cuda.threadIdx.x
        cuda.syncthreads()
        if t == bad[0]:
            x[1000] = 0.0
        cuda.syncthreads()
        x[t] = 3.0

    x = np.zeros(32, dtype=np.float32)
    with pytest.raises(IndexError, match=r"tid=\[7, 0, 0\] ctaid=\[0, 0, 0\]"):
        fails_at_the_second_barrier[1, 32](x, np.array([7]))
    fails_at_the_second_barrier[1, 32](x, np.array([-1]))
    np.testing.assert_array_equal(x, np.full(32, 3.0))


def test_fresh_shared_and_local_memory_hold_the_unset_byte():
    import numba

    @cuda.jit
    def read_unwritten(f, i):
        tile = cuda.shared.array(4, numba.float32)
        other = cuda.shared.array(4, numba.int32)  # another line: another array
        scratch = cuda.local.array(2, numba.int64)
        t = cuda.threadIdx.x
        f[t] = tile[t]
        i[t] = other[t] + scratch[t % 2]

    f = np.zeros(4, dtype=np.float32)
    i = np.zeros(4, dtype=np.int64)
    read_unwritten[1, 4](f, i)
    assert np.isnan(f).all()
    np.testing.assert_array_equal(i, np.full(4, -2))


def test_system_exit_in_a_kernel_ends_that_thread_only():
    @cuda.jit
    def one_exits(x):
        t = cuda.threadIdx.x
        if t == 2:
            raise SystemExit(0)
        x[t] = 1.0

    x = np.zeros(8, dtype=np.float32)
    one_exits[1, 8](x)
    np.testing.assert_array_equal(x, [1, 1, 0, 1, 1, 1, 1, 1])


def test_a_simulator_of_another_shape_keeps_its_own_manager():
    import numba.cuda.simulator.kernel as kernel
    import numba.cuda.simulator.kernelapi as kernelapi

    class Renamed:  # a manager that keeps its function under another name
        def __init__(self, f, grid_dim, block_dim, debug):
            self.func, self._block_dim, self._debug, self.block_state = f, block_dim, debug, None

    assert simulator._known_shape(kernel.BlockManager.__mro__[1], kernelapi)
    assert not simulator._known_shape(Renamed, kernelapi)


def test_two_shared_arrays_declared_on_one_line_are_two_arrays():
    import numba

    @cuda.jit
    def two_tiles(x, out):
        a, b = cuda.shared.array(4, numba.float32), cuda.shared.array(4, numba.float32)
        t = cuda.threadIdx.x
        a[t] = x[t]
        b[t] = 2 * x[t]
        cuda.syncthreads()
        out[t] = a[t] + b[3 - t]

    x = np.arange(4, dtype=np.float32)
    out = np.zeros(4, dtype=np.float32)
    two_tiles[1, 4](x, out)
    assert out.tolist() == [6.0, 5.0, 4.0, 3.0]  # x[t] + 2 x[3 - t]; aliased would give 3 x


def test_every_block_gets_fresh_shared_memory_static_and_dynamic():
    import numba

    @cuda.jit
    def leftovers(out):
        s = cuda.shared.array(1, numba.float32)
        d = cuda.shared.array(0, numba.float32)
        if cuda.blockIdx.x == 0:
            s[0] = 5.0
            d[0] = 6.0
        out[cuda.blockIdx.x, 0] = s[0]
        out[cuda.blockIdx.x, 1] = d[0]

    out = np.zeros((2, 2), dtype=np.float32)
    leftovers[2, 1, 0, 16](out)  # 16 bytes of dynamic shared memory
    assert out[0].tolist() == [5.0, 6.0]
    assert np.isnan(out[1]).all()  # block 1 never sees block 0's values: 0xFF bytes, NaN


def test_syncthreads_predicates_count_live_threads_only():
    @cuda.jit
    def votes(out):
        t = cuda.threadIdx.x
        if t >= 10:
            return  # 22 threads end before the barriers
        n = cuda.syncthreads_count(t < 5)
        every = cuda.syncthreads_and(t < 10)
        some = cuda.syncthreads_or(t > 8)
        out[t] = n * 100 + every * 10 + some

    out = np.zeros(32, dtype=np.int64)
    votes[1, 32](out)
    assert out[:10].tolist() == [511] * 10  # 5 true of 10 live; all of them; thread 9
