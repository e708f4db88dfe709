"""Every path to memory is traced or refused: the closed list of docs/MEMORY_MODEL.md, walked.

Each row of the list ("Every path to memory") names a way a kernel reaches an array's memory and
what the recorder does with it: *traced* (the accesses appear in the profile at their true byte
offsets), *refused* (the launch stops with `memtrace.Untraceable` naming the kernel's line and the
operation) or *not memory* (local and constant arrays: not global or shared memory, never
recorded). Each row is launched here, one small kernel per row, and the list and this file must
name the same rows: a path added to one and not the other fails.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from grader.core import device
from grader.simt import memtrace, simulator
from grader.simt.memmodel import ATOMIC, GLOBAL, LOAD, SHARED, STORE

pytestmark = pytest.mark.skipif(
    device.has_gpu(), reason="the recorder traces the simulator, which runs only without a GPU"
)

DOC = Path(__file__).resolve().parents[3] / "docs" / "MEMORY_MODEL.md"
ROW = re.compile(r"^\| (P\d+) \|.*\| (traced|refused|not memory)[^|]*\|\s*$")
cuda = None
numba = None


@pytest.fixture(scope="module", autouse=True)
def sim():
    global cuda, numba
    device.prepare_numba()
    assert simulator.install()
    import numba as _numba
    from numba import cuda as _cuda  # lazy: after prepare_numba

    cuda, numba = _cuda, _numba


def profile(kernel, *args, config=(1, 32)):
    with memtrace.Recorder(kernel_file=__file__) as rec:
        rec.launching((config[0], 1, 1))
        dev = [
            rec.argument(cuda.to_device(a), f"a{i}") if isinstance(a, np.ndarray) else a
            for i, a in enumerate(args)
        ]
        kernel[config](*dev)
    return rec.profile((config[0], 1, 1), (config[1], 1, 1))


def one(p, space, op, array):
    (site,) = p.where(space, op, array)
    return site


M = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)
OUT = np.zeros(32, dtype=np.float32)


def p_element():
    @cuda.jit
    def k(m, out):
        i = cuda.threadIdx.x
        out[i] = m[1, i]

    s = one(profile(k, M, OUT), GLOBAL, LOAD, "a0")
    assert (s.lanes, s.sectors) == (32, 4)


def p_slice():
    @cuda.jit
    def k(m, out):
        i = cuda.threadIdx.x
        row = m[2:, ::2]  # rows 2.., every other column: a view
        x = row[0, i % 16]
        out[i] = x + m[..., 3][i]

    p = profile(k, M, OUT)
    # row[0, i % 16] is m[2, 2 * (i % 16)]: bytes 256..380 of m, 4 sectors; m[..., 3] a column
    first, column = sorted(p.where(GLOBAL, LOAD, "a0"), key=lambda s: s.sectors)
    assert (first.sectors, column.sectors) == (4, 32)


def p_transpose_attribute():
    @cuda.jit
    def k(m, out):
        i = cuda.threadIdx.x
        out[i] = m.T[i, 1]  # m[1, i]: a row of m

    assert one(profile(k, M, OUT), GLOBAL, LOAD, "a0").sectors == 4

    @cuda.jit
    def strided(m, out):
        i = cuda.threadIdx.x
        out[i] = m.T[1, i]  # m[i, 1]: a column of m, 32 sectors

    assert one(profile(strided, M, OUT), GLOBAL, LOAD, "a0").sectors == 32


def p_transpose_method():
    @cuda.jit
    def k(m, out):
        i = cuda.threadIdx.x
        out[i] = m.transpose()[1, i]  # m[i, 1]

    assert one(profile(k, M, OUT), GLOBAL, LOAD, "a0").sectors == 32


def p_reshape():
    @cuda.jit
    def k(m, out):
        i = cuda.threadIdx.x
        out[i] = m.reshape(1024)[32 * i]  # m[i, 0]

    s = one(profile(k, M, OUT), GLOBAL, LOAD, "a0")
    assert s.sectors == 32 and profile(k, M, OUT).array("a0").distinct_loaded == 32


def p_ravel():
    @cuda.jit
    def k(m, out):
        i = cuda.threadIdx.x
        out[i] = m.ravel()[64 + i]  # m[2, i]

    assert one(profile(k, M, OUT), GLOBAL, LOAD, "a0").sectors == 4


def p_view():
    @cuda.jit
    def k(m, out):
        i = cuda.threadIdx.x
        out[i] = m.view(np.int32)[3, i]

    s = one(profile(k, M, np.zeros(32, np.int32)), GLOBAL, LOAD, "a0")
    assert (s.sectors, s.item) == (4, 4)


def p_real_imag():
    @cuda.jit
    def k(c, out):
        i = cuda.threadIdx.x
        x = c.real[i]
        out[i] = x + c.imag[i]

    c = np.zeros(32, dtype=np.complex128)
    (real, imag) = sorted(
        profile(k, c, np.zeros(32, np.float64)).where(GLOBAL, LOAD, "a0"), key=lambda s: s.line
    )
    # the halves of 32 complex128s: 8 bytes every 16, over 512 bytes: 16 sectors each
    assert (real.sectors, real.itemsize, imag.sectors) == (16, 8, 16)


def p_flat():
    @cuda.jit
    def k(m, out):
        i = cuda.threadIdx.x
        out[i] = m.flat[32 + i]  # m[1, i]

    assert one(profile(k, M, OUT), GLOBAL, LOAD, "a0").sectors == 4


def p_iteration():
    @cuda.jit
    def k(m, out):
        i = cuda.threadIdx.x
        s = 0.0
        for v in m[i, :4]:  # the simulator iterates by index: each element read
            s += v
        for j, v in enumerate(m[i, 4:8]):
            s += v * j
        out[i] = s

    p = profile(k, M, OUT)
    assert p.array("a0").loads == 32 * 8


def p_device_function():
    @cuda.jit(device=True)
    def fetch(m, i):
        return m[i, 0]

    @cuda.jit
    def k(m, out):
        i = cuda.threadIdx.x
        out[i] = fetch(m, i)

    assert one(profile(k, M, OUT), GLOBAL, LOAD, "a0").sectors == 32


def p_atomics():
    @cuda.jit
    def k(hist, out):
        cuda.atomic.add(hist, cuda.threadIdx.x % 2, 1)

    s = one(profile(k, np.zeros(2, np.int32), OUT), GLOBAL, ATOMIC, "a0")
    assert (s.lanes, s.serialised) == (32, 30)


def p_shared():
    @cuda.jit
    def k(out):
        tile = cuda.shared.array(32, numba.float32)
        i = cuda.threadIdx.x
        tile[i] = i
        cuda.syncthreads()
        out[i] = tile[31 - i]

    p = profile(k, OUT)
    assert p.where(SHARED, STORE) and p.where(SHARED, LOAD)


def p_dynamic_shared():
    @cuda.jit
    def k(out):
        dyn = cuda.shared.array(0, numba.float32)
        i = cuda.threadIdx.x
        dyn[i] = i
        cuda.syncthreads()
        out[i] = dyn[i]

    p = profile(k, OUT, config=(1, 32, 0, 128))
    assert p.where(SHARED, STORE) and p.where(SHARED, LOAD)


def p_local():
    @cuda.jit
    def k(out):
        scratch = cuda.local.array(2, numba.float32)
        i = cuda.threadIdx.x
        scratch[0] = i
        out[i] = scratch[0]

    p = profile(k, OUT)
    assert not p.where(SHARED) and not p.where(GLOBAL, LOAD)


def p_const():
    @cuda.jit
    def k(m, out):
        table = cuda.const.array_like(m)
        out[cuda.threadIdx.x] = table[0, cuda.threadIdx.x]

    assert not profile(k, M, OUT).where(GLOBAL, LOAD)


def refused(kernel, args, operation):
    with pytest.raises(memtrace.Untraceable) as caught:
        profile(kernel, *args)
    line = kernel.py_func.__code__.co_firstlineno + 3  # the body's last line in each below
    assert f"line {line} " in str(caught.value) and operation in str(caught.value)


def p_whole_array():
    @cuda.jit
    def k(m, out):
        i = cuda.threadIdx.x
        out[i] = m.sum()

    refused(k, (M, OUT), ".sum")

    @cuda.jit
    def k2(m, out):
        i = cuda.threadIdx.x
        out[i] = np.sum(m)

    refused(k2, (M, OUT), ".sum")

    @cuda.jit
    def k3(m, out):
        i = cuda.threadIdx.x
        m.fill(i)

    refused(k3, (M, OUT), ".fill")


def p_copying_view():
    @cuda.jit
    def k(m, out):
        i = cuda.threadIdx.x
        out[i] = m.T.ravel()[i]  # a transposed array flattens to a copy

    refused(k, (M, OUT), ".ravel()")


def p_slice_store():
    @cuda.jit
    def k(m, out):
        i = cuda.threadIdx.x
        out[i : i + 1] = 1.0

    refused(k, (M, OUT), "a store to a slice")


def p_record():
    @cuda.jit
    def k(r, out):
        i = cuda.threadIdx.x
        out[i] = r[i].x

    rec = np.zeros(32, dtype=[("x", np.float32), ("y", np.float32)])
    refused(k, (rec, OUT), "record")


def p_host_methods():
    @cuda.jit
    def k(m, out):
        i = cuda.threadIdx.x
        out[i] = m.copy_to_host()[0, 0]

    refused(k, (M, OUT), ".copy_to_host()")


PATHS = {
    "P1": ("traced", p_element),
    "P2": ("traced", p_slice),
    "P3": ("traced", p_transpose_attribute),
    "P4": ("traced", p_transpose_method),
    "P5": ("traced", p_reshape),
    "P6": ("traced", p_ravel),
    "P7": ("traced", p_view),
    "P8": ("traced", p_real_imag),
    "P9": ("traced", p_flat),
    "P10": ("traced", p_iteration),
    "P11": ("traced", p_device_function),
    "P12": ("traced", p_atomics),
    "P13": ("traced", p_shared),
    "P14": ("traced", p_dynamic_shared),
    "P15": ("not memory", p_local),
    "P16": ("not memory", p_const),
    "P17": ("refused", p_whole_array),
    "P18": ("refused", p_copying_view),
    "P19": ("refused", p_slice_store),
    "P20": ("refused", p_record),
    "P21": ("refused", p_host_methods),
}


def documented() -> dict[str, str]:
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        m = ROW.match(line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows


def test_the_list_and_this_file_name_the_same_paths_with_the_same_verdicts():
    assert documented() == {k: verdict for k, (verdict, _) in PATHS.items()}


@pytest.mark.parametrize("path", sorted(PATHS, key=lambda k: int(k[1:])))
def test_each_path_does_what_the_list_says(path):
    PATHS[path][1]()
