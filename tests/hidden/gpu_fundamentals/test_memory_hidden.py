"""Hidden tests for S5.1's memory lessons, graded from the memory model (never shipped).

Each test launches the student's kernel once in the simulator with its memory accesses recorded
(`student.kernel[grid, block].profile(...)`, `grader.simt.memmodel`) and checks how the kernel
meets the memory hierarchy: sectors per warp request, bytes moved, shared-memory bank conflicts,
barriers. The profile is the same on every machine (a laptop, CI, a GPU runner), so these points
are as reproducible as any other. The shapes are the stated ones; the values in the arrays come
from the student's seed where a test checks the result itself; the transposes' profiled matrix
is `arange` (each element distinct), the same for the three tests that grade its one launch,
and its shape has partial tiles at the right and bottom edges. Arrays are addressed by their
position in the kernel's arguments (`Profiled.arg`), never by the reference's parameter names:
a student names them as they like. Behaviour is graded, not code: any design that coalesces,
stages and reuses as the notebook describes earns the points.

Stated rules (grader verify checks that every test here is listed, with a sentence that appears
word for word in the released notebook):

- test_strided_copy_sectors_match_the_model: "every read request must touch exactly
  `sectors_per_warp(stride, itemsize)` sectors, the course's answer for that stride and size,
  and every write request the ideal."
- test_transpose_naive_reads_coalesced_writes_strided: "the reads of `src` must be coalesced (4
  sectors per request, the ideal) and the writes to `dst` strided (32 sectors per request)"
- test_transpose_tiled_coalesces_both_ways: "every request that reads `src` or writes `dst`
  touches the ideal number of sectors;"
- test_transpose_tiled_moves_each_element_once: "every element of `src` is read from global
  memory once and every element of `dst` written once, and the data passes through shared
  memory, with at least one barrier in every block;"
- test_transpose_tiled_reads_the_tile_without_bank_conflicts: "the tile is stored into and read
  back from shared memory with one wavefront per request"
- test_matmul_tiled_reuses_each_load: "its accesses to global memory (loads, stores and atomics of
  every array, `c` included) must be at most `1.25 / TILE` of the `2 x M x N x K` loads that the
  naive kernel makes, plus one store per element of `c`"

PYTEST_DONT_REWRITE: pytest leaves these asserts alone, because their messages are what the
student reads as feedback.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.simt.memmodel import GLOBAL, LOAD, SHARED, STORE
from grader.suites.testing import unwritten

TILE = 32
ITEM_DTYPES = {1: np.int8, 2: np.float16, 4: np.float32, 8: np.float64, 16: np.complex128}
NAIVE_SHAPE = (64, 96)  # whole blocks of 32 x 8
# one tile and a partial one each way (rows 32 + 8, columns 64 + 8): every row of either matrix
# starts on a sector, so every request of a coalesced kernel is ideal, and the edge blocks are
# graded like the others (a kernel that tiles only whole tiles loses the tiling lessons)
TRANSPOSE_SHAPE = (40, 72)
MATMUL_MNK = (32, 32, 32)  # one block, one tile step: the reuse is TILE-fold all the same


def _sites(profiled, space, op, position):
    """The sites of the kernel's argument at `position` (whatever the student named it)."""
    return profiled.memory.where(space, op, profiled.arg(position))


def _traffic(profiled, position):
    return profiled.memory.array(profiled.arg(position))


def _shown(sites) -> str:
    return "; ".join(
        f"{s.where}: {s.requests} requests, {s.sectors_per_request:.1f} sectors each "
        f"(ideal {s.ideal_sectors / s.requests:.1f})"
        for s in sites
    )


def _profile_transpose(student, name, grid, block, shape=TRANSPOSE_SHAPE):
    rows, cols = shape
    src = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)  # every element distinct
    dst = unwritten((cols, rows))
    profiled = getattr(student, name)[grid, block].profile(src, dst)
    assert np.array_equal(dst, src.T), (  # grader: public
        f"{name}[{grid}, {block}] on a {rows} x {cols} float32 matrix did not transpose it, so "
        "its memory profile earns nothing; see the correctness tests' feedback"
    )
    return profiled


def _tiled(student):
    """The one profiled launch of transpose_tiled that three tests grade (the grading runs it
    once: `grader.suites.memory` keeps a launch's profile for the same source and inputs)."""
    rows, cols = TRANSPOSE_SHAPE
    grid = (-(-cols // TILE), -(-rows // TILE))
    return _profile_transpose(student, "transpose_tiled", grid, (TILE, 1))


@pytest.mark.points(1)
def test_strided_copy_sectors_match_the_model(student, reference, rng):
    strides = [1, 32, *(int(s) for s in rng.integers(0, 40, size=2))]
    sizes = [4, *(int(v) for v in rng.choice(list(ITEM_DTYPES), size=3))]
    for stride, itemsize in zip(strides, sizes, strict=True):
        dtype = ITEM_DTYPES[itemsize]
        src = (rng.standard_normal(32 * max(stride, 1)) * 50).astype(dtype)
        dst = np.zeros(64, dtype=dtype)
        profiled = student.strided_copy[2, 32].profile(src, dst, stride)
        want = src[(np.arange(64) * stride) % src.size]
        assert np.array_equal(dst, want), (
            f"strided_copy[2, 32] with stride {stride} on {np.dtype(dtype).name} arrays did not "
            "copy dst[i] = src[(i * stride) % src.size]; its profile earns nothing"
        )
        expected = reference.sectors_per_warp(stride, itemsize=itemsize)
        reads = _sites(profiled, GLOBAL, LOAD, 0)
        assert reads and all(s.min_sectors == s.max_sectors == expected for s in reads), (
            f"strided_copy with stride {stride} and {itemsize}-byte elements: each warp's read "
            f"of src should touch sectors_per_warp({stride}, itemsize={itemsize}) = {expected} "
            f"sectors; the grader counted {_shown(reads) or 'no reads of src'}. Read "
            "src[(i * stride) % src.size] once per thread, with i = cuda.grid(1)"
        )
        writes = _sites(profiled, GLOBAL, STORE, 1)
        assert writes and all(s.sectors == s.ideal_sectors for s in writes), (
            f"strided_copy with stride {stride}: the writes to dst should be coalesced "
            f"(thread i writes dst[i]); the grader counted {_shown(writes) or 'no writes'}"
        )


@pytest.mark.points(1)
def test_transpose_naive_reads_coalesced_writes_strided(student):
    rows, cols = NAIVE_SHAPE
    grid = (cols // 32, rows // 8)
    profiled = _profile_transpose(student, "transpose_naive", grid, (32, 8), NAIVE_SHAPE)
    reads = _sites(profiled, GLOBAL, LOAD, 0)
    writes = _sites(profiled, GLOBAL, STORE, 1)
    assert reads and all(s.min_sectors == s.max_sectors == 4 for s in reads), (
        f"transpose_naive[{grid}, (32, 8)]: each warp reads 32 neighbours of one row of src, 4 "
        f"sectors per request; the grader counted {_shown(reads) or 'no reads of src'}. Thread "
        "(x, y) = cuda.grid(2) reads src[y, x], with x along the columns"
    )
    assert writes and all(s.min_sectors == s.max_sectors == 32 for s in writes), (
        f"transpose_naive[{grid}, (32, 8)]: each warp writes one column of dst, 32 sectors per "
        f"request; the grader counted {_shown(writes) or 'no writes to dst'}. The naive kernel "
        "writes dst[x, y] directly (the tiled one is where the writes get fixed)"
    )


@pytest.mark.points(2)
def test_transpose_tiled_coalesces_both_ways(student):
    profiled = _tiled(student)
    for position, op, verb in ((0, LOAD, "reads of src"), (1, STORE, "writes to dst")):
        sites = _sites(profiled, GLOBAL, op, position)
        bad = [s for s in sites if s.sectors != s.ideal_sectors]
        assert sites and not bad, (
            f"transpose_tiled on a {TRANSPOSE_SHAPE[0]} x {TRANSPOSE_SHAPE[1]} matrix (partial "
            f"tiles at the edges): the {verb} should touch the ideal sectors (whole rows of "
            "neighbours, in the edge tiles too); the grader "
            f"counted {_shown(bad or sites) or 'none'}. Read rows of src into the tile and write "
            "rows of dst out of it, with the lanes of a warp along the row"
        )


@pytest.mark.points(1)
def test_transpose_tiled_moves_each_element_once(student):
    profiled = _tiled(student)
    memory = profiled.memory
    src, dst = _traffic(profiled, 0), _traffic(profiled, 1)
    size = TRANSPOSE_SHAPE[0] * TRANSPOSE_SHAPE[1]
    assert src is not None and src.loads == src.distinct_loaded == size, (
        f"transpose_tiled read src {getattr(src, 'loads', 0)} times for its {size} elements; "
        "each element should be read from global memory exactly once"
    )
    assert dst is not None and dst.stores == dst.distinct_stored == size and not dst.loads, (
        f"transpose_tiled wrote dst {getattr(dst, 'stores', 0)} times (and read it "
        f"{getattr(dst, 'loads', 0)} times) for its {size} elements; each should be written once"
    )
    staged = memory.where(SHARED, STORE) and memory.where(SHARED, LOAD)
    assert staged, (
        "transpose_tiled never both stored into and loaded from shared memory: stage each tile "
        "in cuda.shared.array((TILE, TILE_PADDED), numba.float32) and read it back"
    )
    assert memory.min_block_barriers >= 1, (
        f"of the {memory.blocks} blocks, at least one passed no barrier: call "
        "cuda.syncthreads() in every block, the partial tiles at the edges included, between "
        "filling the tile and reading it back"
    )


@pytest.mark.points(1)
def test_transpose_tiled_reads_the_tile_without_bank_conflicts(student):
    profiled = _tiled(student)
    reads = profiled.memory.where(SHARED, LOAD)
    assert reads, "transpose_tiled reads nothing back from shared memory, so no tile to read"
    for op, verb in ((STORE, "stores into"), (LOAD, "reads")):
        sites = profiled.memory.where(SHARED, op)
        worst = max(sites, key=lambda s: s.max_ways, default=None)
        assert worst is None or worst.max_ways == 1, (
            f"transpose_tiled {verb} {worst.array} at {worst.where} with up to "
            f"{worst.max_ways}-way bank conflicts ({worst.wavefronts} wavefronts for "
            f"{worst.requests} requests, ideal {worst.ideal_wavefronts}): the lanes of a warp "
            f"{'store' if op == STORE else 'read'} a column of the tile, and in a TILE x TILE "
            "float32 array a column sits in one bank. Pad the rows to TILE_PADDED"
        )


@pytest.mark.points(2)
def test_matmul_tiled_reuses_each_load(student, rng):
    m, n, k = MATMUL_MNK
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = unwritten((m, n))
    grid = (n // TILE, m // TILE)
    profiled = student.matmul_tiled[grid, (TILE, 1)].profile(a, b, c)
    want = a.astype(np.float64) @ b.astype(np.float64)
    assert np.allclose(c, want, rtol=1e-4, atol=1e-3), (
        f"matmul_tiled[{grid}, ({TILE}, 1)] on {m} x {k} @ {k} x {n} did not compute a @ b, so "
        "its memory profile earns nothing; see the correctness tests' feedback"
    )
    memory = profiled.memory
    accesses = {t.name: t.loads + t.stores + t.atomics for t in memory.arrays if t.space == GLOBAL}
    naive = 2 * m * n * k
    budget = 1.25 * naive / TILE + m * n
    total = memory.global_accesses  # loads, stores and atomics of every global array
    assert 0 < total <= budget, (
        f"matmul_tiled made {total:,} accesses to global memory for "
        f"{m} x {k} @ {k} x {n} ({', '.join(f'{v:,} to {a}' for a, v in accesses.items())}; "
        "loads, stores and atomics all count); the naive kernel makes "
        f"{naive:,} loads and a tiled one about {naive // TILE:,} (1 / TILE of it) plus "
        f"{m * n:,} stores of c: at most {budget:,.0f} pass. Load each tile once per step into "
        "shared memory, do every multiply-add from there, keep the sums in registers and "
        "store each element of c once"
    )
    sites = memory.where(GLOBAL, LOAD)
    bad = [s for s in sites if s.sectors != s.ideal_sectors]
    assert not bad, (
        f"matmul_tiled's loads from global memory are not coalesced: {_shown(bad)}. Let the "
        "lanes of a warp load neighbours along a row of a and of b"
    )
    assert memory.min_block_barriers >= 1, (
        "a block of matmul_tiled passed no barrier: cuda.syncthreads() after filling the tiles "
        "and again before the next step overwrites them"
    )
