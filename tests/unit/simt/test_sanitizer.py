"""`grader.simt.sanitizer`: compute-sanitizer's four checks on simulated launches.

The point of the module: a race the simulator's thread order hides (thread t reads, without a
barrier, what thread t-1 staged in shared memory) is found although the output is right. Correct
kernels (barriers, syncwarp in one warp, atomics) have no finding; each check's finding names the
line, the array, the element and the threads. A finding crosses the sandbox as checked data.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.core import device
from grader.simt import sanitizer, simulator

pytestmark = pytest.mark.skipif(
    device.has_gpu(), reason="the simulator is what runs kernels only on a machine without a GPU"
)

cuda = None
numba = None


@pytest.fixture(scope="module", autouse=True)
def sim():
    global cuda, numba
    device.prepare_numba()
    assert simulator.install()
    import numba  # noqa: F401  # the kernels' dtypes
    from numba import cuda  # lazy: after prepare_numba


def _only(check):
    found = [f for f in sanitizer.findings() if f.check == check]
    assert found, sanitizer.findings()
    return found[0]


def test_a_race_the_thread_order_hides_is_found_though_the_output_is_right():
    @cuda.jit
    def staged_add(a, b, c):
        stage = cuda.shared.array(64, numba.float32)
        t = cuda.threadIdx.x
        i = cuda.grid(1)
        stage[t] = a[i]
        if t > 0:
            c[i] = stage[t - 1] + 1.0 + b[i]  # a[i - 1] + 1 is a[i]: right, by luck
        else:
            c[i] = a[i] + b[i]

    a = np.arange(128, dtype=np.float32)
    b = np.ones_like(a)
    c = np.zeros_like(a)
    staged_add[2, 64](a, b, c)
    np.testing.assert_array_equal(c, a + b)  # right, because thread t-1 ran first
    f = _only("racecheck")
    assert f.kind == "read_after_write"
    assert f.array.startswith("shared@")
    assert f.threads[0][:3] == (f.element[0], 0, 0)  # the writer staged element t-1
    assert f.threads[1][:3] == (f.element[0] + 1, 0, 0)  # the reader is thread t
    said = f.said(names={f.array: "stage"})
    assert said.startswith("racecheck: ") and "shared array `stage` element [" in said
    assert "no barrier between them" in said and "cuda.syncthreads()" in said


def test_correct_kernels_have_no_finding():
    @cuda.jit
    def block_sum(x, out):
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
        cuda.atomic.add(out, 2, 1.0)  # atomics are not races

    @cuda.jit
    def one_warp_transpose(src, dst):
        tile = cuda.shared.array((8, 4), numba.float32)
        t = cuda.threadIdx.x
        tile[t // 4, t % 4] = src[t // 4, t % 4]
        cuda.syncwarp()
        dst[t % 4, t // 4] = tile[t // 4, t % 4]
        cuda.syncwarp()
        tile[t // 4, t % 4] = 0.0  # the write after the reads, ordered by the syncwarp

    out = np.zeros(3, dtype=np.float32)
    block_sum[2, 64](np.ones(128, dtype=np.float32), out)
    assert out.tolist() == [64.0, 64.0, 128.0] and sanitizer.findings() == []
    src = np.arange(32, dtype=np.float32).reshape(8, 4)
    dst = np.zeros((4, 8), dtype=np.float32)
    one_warp_transpose[1, 32](src, dst)
    assert (dst == src.T).all() and sanitizer.findings() == []


def test_syncwarp_orders_one_warp_not_two():
    @cuda.jit
    def across_warps(out):
        s = cuda.shared.array(64, numba.int32)
        t = cuda.threadIdx.x
        s[t] = t
        cuda.syncwarp()
        out[t] = s[63 - t]  # the other warp's element: a syncwarp does not order warps

    across_warps[1, 64](np.zeros(64, dtype=np.int32))
    f = _only("racecheck")
    assert {f.threads[0][0] // 32, f.threads[1][0] // 32} == {0, 1}


def test_initcheck_finds_a_read_of_shared_memory_nobody_wrote():
    @cuda.jit
    def last_unwritten(out):
        s = cuda.shared.array(32, numba.float32)
        t = cuda.threadIdx.x
        if t < 31:
            s[t] = 1.0
        cuda.syncthreads()
        out[t] = s[31 - t]

    last_unwritten[1, 32](np.zeros(32, dtype=np.float32))
    f = _only("initcheck")
    assert (f.kind, f.element, f.threads) == ("uninitialized", (31,), ((0, 0, 0, 0, 0, 0),))
    assert "before any thread wrote it" in f.said()


def test_memcheck_stops_a_negative_index_that_numpy_would_wrap():
    @cuda.jit
    def previous(x, y):
        t = cuda.threadIdx.x
        y[t] = x[t - 1]

    with pytest.raises(
        IndexError,
        match=r"memcheck: line \d+ indexes `x` at \[-1\] in thread "
        r"\(0, 0, 0\) of block \(0, 0, 0\): out of bounds",
    ):
        previous[1, 8](np.zeros(8), np.zeros(8))
    f = _only("memcheck")
    assert (f.array, f.element) == ("x", (-1,))

    @cuda.jit
    def past_shared(out):
        s = cuda.shared.array((4, 4), numba.float32)
        out[0] = s[cuda.threadIdx.x, 4]

    with pytest.raises(IndexError, match=r"memcheck: .* at \[0, 4\]"):
        past_shared[1, 1](np.zeros(1, dtype=np.float32))


def test_synccheck_finds_threads_at_two_different_barriers():
    @cuda.jit
    def divergent(x):
        t = cuda.threadIdx.x
        if t < 16:
            cuda.syncthreads()
        else:
            cuda.syncthreads()
        x[t] = 1.0

    divergent[1, 32](np.zeros(32))
    f = _only("synccheck")
    assert f.threads[0][0] < 16 <= f.threads[1][0] and f.line != f.other_line


def test_a_global_write_race_between_threads():
    @cuda.jit
    def everyone_writes(x, out):
        out[0] = x[cuda.grid(1)]

    everyone_writes[2, 4](np.zeros(8), np.zeros(1))
    f = _only("racecheck")
    assert (f.kind, f.array, f.element) == ("write_after_write", "out", (0,))


def test_a_finding_crosses_as_checked_data():
    f = sanitizer.Finding(
        "racecheck",
        "read_after_write",
        9,
        "shared@5",
        (3,),
        ((3, 0, 0, 0, 0, 0), (4, 0, 0, 0, 0, 0)),
        7,
    )
    assert sanitizer.Finding.from_plain(f.as_plain()) == f
    said = f.said(lambda n: f"line {n + 100} of nb.py", {"shared@5": "tile"})
    assert "line 109 of nb.py reads shared array `tile` element [3] in thread (4, 0, 0)" in said
    assert "which thread (3, 0, 0) of the same block wrote at line 107 of nb.py" in said
    for bad in (
        None,
        {**f.as_plain(), "check": "lintcheck"},
        {**f.as_plain(), "line": "9"},
        {**f.as_plain(), "threads": [[1, 2, 3]]},
        {**f.as_plain(), "extra": 1},
    ):
        with pytest.raises(sanitizer.FindingError):
            sanitizer.Finding.from_plain(bad)


def test_initcheck_follows_a_device_array_until_it_is_written():
    @cuda.jit
    def accumulate(x, out):
        i = cuda.grid(1)
        out[i] += x[i]  # reads out before anything wrote it

    @cuda.jit
    def fill(out):
        out[cuda.grid(1)] = 0.0

    out = cuda.device_array(8, dtype=np.float64)
    accumulate[1, 8](np.ones(8), out)
    f = _only("initcheck")
    assert (f.array, f.element, f.threads[0][:3]) == ("out", (0,), (0, 0, 0))
    out = cuda.device_array(8, dtype=np.float64)
    fill[1, 8](out)
    accumulate[1, 8](np.ones(8), out)  # written by the launch before: initialised
    assert sanitizer.findings() == []
    copied = cuda.to_device(np.zeros(8))  # copied from the host: initialised
    accumulate[1, 8](np.ones(8), copied)
    assert sanitizer.findings() == []


def test_synccheck_reports_a_warp_mask_that_cannot_be_met():
    @cuda.jit
    def half_returns(x):
        i = cuda.threadIdx.x
        if i >= 16:
            return
        x[i] = cuda.shfl_down_sync(0xFFFFFFFF, x[i], 1)

    with pytest.raises(Exception, match="shfl_down_sync"):
        half_returns[1, 32](np.zeros(32))
    f = _only("synccheck")
    assert (f.kind, f.array) == ("warp_mask", "shfl_down_sync")
    assert f.threads[0][0] < 16 <= f.threads[1][0]  # one that came, one that had returned
    assert f.said().startswith("synccheck: thread (0, 0, 0) of block (0, 0, 0) calls ")


def test_memcheck_bounds_local_arrays_too():
    @cuda.jit
    def window(x, out):
        acc = cuda.local.array(4, numba.float32)
        for k in range(4):
            acc[k] = x[k]
        out[0] = acc[cuda.threadIdx.x - 1]  # thread 0 reads acc[-1]

    with pytest.raises(IndexError, match=r"memcheck: line \d+ indexes the local array declared"):
        window[1, 2](np.ones(4, dtype=np.float32), np.zeros(1, dtype=np.float32))
    assert _only("memcheck").element == (-1,)


def test_iterating_rows_and_views_reads_each_element_once_in_bounds():
    """`zip(a[y], b.T[x])` and `for v in tile[t]`: Python's old iteration protocol would read
    one element past the end (memcheck); each read is checked at the kernel's own line."""

    @cuda.jit
    def rows(a, b, c):
        x, y = cuda.grid(2)
        tile = cuda.shared.array((4, 4), numba.float32)
        tile[y, x] = a[y, x]
        cuda.syncthreads()
        acc = numba.float32(0.0)
        for u, v in zip(a[y], b.T[x]):  # noqa: B905  # Numba's zip takes no strict=
            acc += u * v
        for w in tile[y]:
            acc += w
        c[y, x] = acc

    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    b = np.ones_like(a)
    c = np.zeros_like(a)
    rows[1, (4, 4)](a, b, c)
    assert sanitizer.findings() == []
    np.testing.assert_array_equal(c, a @ b + a.sum(axis=1, keepdims=True))


def test_a_race_read_by_iteration_names_the_kernels_line():
    @cuda.jit
    def racy(a, c):
        t = cuda.threadIdx.x
        stage = cuda.shared.array((2, 4), numba.float32)
        stage[t % 2, t // 2] = a[t]
        acc = numba.float32(0.0)
        for v in stage[0]:  # reads what other threads staged, with no barrier between
            acc += v
        c[t] = acc

    a = np.ones(8, dtype=np.float32)
    c = np.zeros_like(a)
    racy[1, 8](a, c)
    f = _only("racecheck")
    first = racy.py_func.__code__.co_firstlineno  # the decorator's line
    assert f.line == first + 6  # the `for` line, not a line of the sanitizer
