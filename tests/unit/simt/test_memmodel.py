"""The memory model (`grader.simt.memmodel`) and its recorder (`grader.simt.memtrace`).

Agreement first: the model's sector count equals the course's `sectors_per_warp` on more than
10,000 drawn strides, item sizes and warp positions, and on launches traced through the
simulator. Then a dozen access patterns whose figures are worked out by hand, each launched in
the simulator with its accesses recorded: coalesced, strided, broadcast, a misaligned start, a
row and a column of a 2-D array, a partial last warp, a divergent branch, an access in a device
function, a slice, atomics, 8-byte items, shared memory broadcast, conflict and padding; local
and constant arrays are not global memory. Last, a profile is checked on the way in: a forged
one is refused.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from factories import solution_function

from grader.core import device
from grader.simt import memmodel, memtrace, simulator
from grader.simt.memmodel import ATOMIC, GLOBAL, LOAD, SHARED, STORE, LaunchProfile

pytestmark = pytest.mark.skipif(
    device.has_gpu(), reason="the recorder traces the simulator, which runs only without a GPU"
)

cuda = None  # numba.cuda, set by the fixture: the simulator finds it among a kernel's globals
numba = None


@pytest.fixture(scope="module", autouse=True)
def sim():
    global cuda, numba
    device.prepare_numba()
    assert simulator.install()
    import numba as _numba
    from numba import cuda as _cuda  # lazy: after prepare_numba

    cuda, numba = _cuda, _numba


def traced(kernel, grid, block, *args) -> LaunchProfile:
    """Launch `kernel` with every array argument traced (named a0, a1, ...)."""
    grid3 = (*(grid if isinstance(grid, tuple) else (grid,)), 1, 1)[:3]
    block3 = (*(block if isinstance(block, tuple) else (block,)), 1, 1)[:3]
    with memtrace.Recorder(kernel_file=__file__) as rec:
        rec.launching(grid3)
        dev = [
            rec.argument(cuda.to_device(a), f"a{i}") if isinstance(a, np.ndarray) else a
            for i, a in enumerate(args)
        ]
        kernel[grid, block](*dev)
    return rec.profile(grid3, block3)


def only(profile: LaunchProfile, space=None, op=None, array=None):
    (site,) = profile.where(space, op, array)
    return site


# ---- agreement with the course's sectors_per_warp


def test_sectors_agree_with_sectors_per_warp_on_ten_thousand_draws():
    reference = solution_function("sectors_per_warp")
    rng = np.random.default_rng(20261206)
    checked = 0
    for _ in range(10_500):
        stride = int(rng.integers(0, 70)) if rng.random() < 0.8 else int(rng.integers(0, 5000))
        itemsize = int(rng.choice([1, 2, 4, 8, 16]))
        warp = int(rng.integers(0, 64))  # which warp of a long launch: its lanes' offsets
        offsets = [(32 * warp + lane) * stride * itemsize for lane in range(32)]
        assert memmodel.sectors(offsets, itemsize) == reference(stride, itemsize=itemsize), (
            stride,
            itemsize,
            warp,
        )
        checked += 1
    assert checked > 10_000


def test_traced_strided_reads_agree_with_sectors_per_warp():
    reference = solution_function("sectors_per_warp")

    @cuda.jit
    def strided(src, dst, stride):
        i = cuda.grid(1)
        if i < dst.size:
            dst[i] = src[(i * stride) % src.size]

    rng = np.random.default_rng(7)
    for _ in range(30):
        stride = int(rng.integers(0, 40))
        dtype = [np.int8, np.float16, np.float32, np.float64, np.complex128][int(rng.integers(5))]
        itemsize = np.dtype(dtype).itemsize
        src = np.zeros(32 * max(stride, 1), dtype=dtype)
        dst = np.zeros(64, dtype=dtype)
        p = traced(strided, 2, 32, src, dst, stride)
        read = only(p, GLOBAL, LOAD)
        assert read.min_sectors == read.max_sectors == reference(stride, itemsize=itemsize)
        # a complex128 is two 8-byte requests per warp (Numba's two LDG.E.64), each touching
        # the sectors its elements span
        assert read.requests == 2 * read.parts and read.accesses == 64
        write = only(p, GLOBAL, STORE)  # dst[i]: ideal, halves or not (the hidden test's rule)
        assert write.sectors == write.ideal_sectors


def test_summarise_is_the_per_request_definitions_on_random_launches():
    """The vectorised grouping gives, site by site, what `sectors`, `ideal_sectors`,
    `wavefronts` and `serialised` give request by request (grouped here the plain way: the
    lanes of a warp at a site in one dynamic instance, each thread's n-th time there)."""
    rng = np.random.default_rng(11)
    sizes = [(1, 1), (2, 2), (4, 4), (8, 8), (16, 16), (8, 16), (4, 8)]  # (unit, element)
    for _ in range(60):
        threads = int(rng.integers(1, 130))
        keys = [
            memmodel.SiteKey(line, f"x{line}", space, op, *sizes[int(rng.integers(len(sizes)))])
            for line, (space, op) in enumerate(
                [(GLOBAL, LOAD), (GLOBAL, STORE), (SHARED, LOAD), (SHARED, STORE), (GLOBAL, ATOMIC)]
            )
        ]
        accesses, seen, requests = [], {}, {}
        for blk in range(int(rng.integers(1, 4))):
            for t in range(threads):
                for _ in range(int(rng.integers(0, 6))):
                    site = int(rng.integers(len(keys)))
                    inst = int(rng.integers(0, 3))  # which loop iteration, say
                    off = int(rng.integers(0, 300)) * keys[site].element
                    if rng.random() < 0.3:
                        off = (t % 4) * keys[site].element  # some lanes share an element
                    accesses.append((blk, t, site, off, inst))
                    nth = seen.get((blk, t, site, inst), 0)
                    seen[(blk, t, site, inst)] = nth + 1
                    requests.setdefault((site, blk, t // 32, inst, nth), {})[t % 32] = off
        arrays = {k.array: (k.space, k.itemsize, 300) for k in keys}
        p = memmodel.summarise((3, 1, 1), (threads, 1, 1), keys, accesses, arrays, {})
        for i, k in enumerate(keys):
            mine = [lanes for key, lanes in requests.items() if key[0] == i]
            if not mine:
                assert not p.where(array=k.array)
                continue
            (site,) = p.where(array=k.array)
            assert site.requests == len(mine) and site.lanes == sum(map(len, mine))
            serialised = sum(memmodel.serialised(list(lanes.values())) for lanes in mine)
            assert site.serialised == (serialised if k.op == ATOMIC else 0)
            if k.space == GLOBAL:
                each = [memmodel.sectors(lanes.values(), k.itemsize) for lanes in mine]
                ideal = sum(
                    memmodel.ideal_sectors(lanes.values(), k.itemsize, k.element) for lanes in mine
                )
                assert (site.sectors, site.ideal_sectors) == (sum(each), ideal)
                assert (site.min_sectors, site.max_sectors) == (min(each), max(each))
            else:
                each = [memmodel.wavefronts(lanes, k.itemsize) for lanes in mine]
                assert site.wavefronts == sum(w for w, _, _ in each)
                assert site.ideal_wavefronts == sum(i for _, i, _ in each)
                assert site.max_ways == max(ways for _, _, ways in each)


# ---- hand-computed patterns


def test_coalesced_strided_broadcast_and_misaligned_reads():
    @cuda.jit
    def reads(x, out, mode):
        i = cuda.grid(1)
        if mode == 0:
            out[i] = x[i]  # 32 neighbours
        elif mode == 1:
            out[i] = x[2 * i]  # every other float32
        elif mode == 2:
            out[i] = x[0]  # one element for everyone
        else:
            out[i] = x[i + 1]  # one float32 late: straddles five sectors

    x = np.zeros(128, dtype=np.float32)
    out = np.zeros(32, dtype=np.float32)
    for mode, (sectors, ideal) in enumerate(((4, 4), (8, 4), (1, 1), (5, 4))):
        site = only(traced(reads, 1, 32, x, out, mode), GLOBAL, LOAD, "a0")
        assert (site.sectors, site.ideal_sectors, site.requests) == (sectors, ideal, 1), mode
        assert site.efficiency == pytest.approx(ideal / sectors)
        write = only(traced(reads, 1, 32, x, out, mode), GLOBAL, STORE, "a1")
        assert (write.sectors, write.ideal_sectors) == (4, 4)


def test_a_row_and_a_column_of_a_2d_array():
    @cuda.jit
    def row_and_column(m, out):
        lane = cuda.threadIdx.x
        out[0, lane] = m[5, lane]  # a row: neighbours
        out[1, lane] = m[lane, 5]  # a column: 64 floats apart

    m = np.zeros((64, 64), dtype=np.float32)
    out = np.zeros((2, 32), dtype=np.float32)
    p = traced(row_and_column, 1, 32, m, out)
    row, column = sorted(p.where(GLOBAL, LOAD), key=lambda s: s.line)
    assert (row.sectors, column.sectors, column.ideal_sectors) == (4, 32, 4)
    assert row.line < column.line


def test_a_partial_last_warp_and_a_divergent_branch():
    @cuda.jit
    def partial(x, out):
        i = cuda.grid(1)
        if i < 40:
            out[i] = x[i]

    x = np.zeros(64, dtype=np.float32)
    out = np.zeros(64, dtype=np.float32)
    read = only(traced(partial, 1, 40, x, out), GLOBAL, LOAD)
    # warp 0: 32 lanes, 4 sectors; warp 1: its 8 threads, all active: 1 sector, not divergent
    assert (read.requests, read.lanes, read.sectors, read.min_sectors, read.divergent) == (
        2,
        40,
        5,
        1,
        0,
    )

    @cuda.jit
    def evens(x, out):
        i = cuda.grid(1)
        if i % 2 == 0:
            out[i] = x[i]

    read = only(traced(evens, 1, 32, x, out), GLOBAL, LOAD)
    # 16 lanes, 64 useful bytes spread over the 128 a full warp would read
    assert (read.lanes, read.divergent, read.sectors, read.ideal_sectors) == (16, 1, 4, 2)


def test_an_access_in_a_device_function_is_that_functions_line():
    @cuda.jit(device=True)
    def fetch(x, i):
        return x[i]

    @cuda.jit
    def through_device(x, out):
        i = cuda.grid(1)
        out[i] = fetch(x, i)

    x = np.zeros(32, dtype=np.float32)
    out = np.zeros(32, dtype=np.float32)
    p = traced(through_device, 1, 32, x, out)
    read, write = only(p, GLOBAL, LOAD), only(p, GLOBAL, STORE)
    assert read.sectors == 4 and read.line == fetch.py_func.__code__.co_firstlineno + 2  # x[i]
    assert write.line == through_device.py_func.__code__.co_firstlineno + 3  # from @cuda.jit


def test_a_slice_is_traced_at_its_offset_in_the_same_array():
    @cuda.jit
    def from_a_row(m, out):
        lane = cuda.threadIdx.x
        row = m[3]  # a view: its elements are m's, 3 rows in
        out[lane] = row[lane + 4]

    m = np.zeros((8, 40), dtype=np.float32)
    out = np.zeros(32, dtype=np.float32)
    p = traced(from_a_row, 1, 32, m, out)
    read = only(p, GLOBAL, LOAD, "a0")
    # row 3 starts at byte 480 (15 sectors in); +4 floats: bytes 496-623, sectors 15 to 19
    assert (read.sectors, read.ideal_sectors) == (5, 4)
    assert p.array("a0").distinct_loaded == 32


def test_atomics_are_one_access_each_not_a_load_and_a_store():
    @cuda.jit
    def count(hist, x):
        i = cuda.grid(1)
        cuda.atomic.add(hist, x[i] % 4, 1)

    hist = np.zeros(4, dtype=np.int32)
    x = np.arange(64, dtype=np.int32)
    p = traced(count, 2, 32, hist, x)
    atomic = only(p, GLOBAL, ATOMIC)
    assert (atomic.requests, atomic.lanes, atomic.sectors) == (2, 64, 2)
    assert not p.where(GLOBAL, LOAD, "a0") and not p.where(GLOBAL, STORE, "a0")
    assert p.array("a0").atomics == 64


def test_eight_byte_items():
    @cuda.jit
    def copy(x, out):
        i = cuda.grid(1)
        out[i] = x[i]

    x = np.zeros(32, dtype=np.float64)
    out = np.zeros(32, dtype=np.float64)
    read = only(traced(copy, 1, 32, x, out), GLOBAL, LOAD)
    assert (read.sectors, read.ideal_sectors) == (8, 8)


def test_shared_broadcast_conflicts_and_padding():
    @cuda.jit
    def shared(out, mode):
        tile = cuda.shared.array(1056, numba.float32)
        wide = cuda.shared.array(64, numba.float64)
        lane = cuda.threadIdx.x
        tile[lane] = 1.0
        wide[lane] = 2.0
        cuda.syncthreads()
        if mode == 0:
            out[lane] = tile[0]  # broadcast: one word
        elif mode == 1:
            out[lane] = tile[32 * lane]  # a column of a 32 x 32 tile: one bank
        elif mode == 2:
            out[lane] = tile[33 * lane]  # the same column with rows padded to 33
        else:
            out[lane] = wide[lane]  # 8-byte items: two phases of 16 lanes

    out = np.zeros(32, dtype=np.float32)
    expected = ((1, 1, 1), (32, 32, 1), (1, 1, 1), (1, 2, 2))  # ways, wavefronts, ideal
    for mode, (ways, wavefronts, ideal) in enumerate(expected):
        p = traced(shared, 1, 32, out, mode)
        read = only(p, SHARED, LOAD)
        assert (read.max_ways, read.wavefronts, read.ideal_wavefronts) == (ways, wavefronts, ideal)
        assert p.barriers == 1 and p.min_block_barriers == 1


def test_local_and_constant_arrays_are_not_global_memory():
    @cuda.jit
    def local_and_const(x, out):
        scratch = cuda.local.array(4, numba.float32)
        i = cuda.grid(1)
        scratch[0] = 1.0
        table = cuda.const.array_like(x)
        out[i] = scratch[0] + table[i]

    x = np.zeros(32, dtype=np.float32)
    out = np.zeros(32, dtype=np.float32)
    p = traced(local_and_const, 1, 32, x, out)
    assert not p.where(GLOBAL, LOAD) and only(p, GLOBAL, STORE).sectors == 4
    assert p.array("a0").loads == 0


def test_barriers_are_counted_per_block():
    @cuda.jit
    def two_barriers_in_block_zero(out):
        if cuda.blockIdx.x == 0:
            cuda.syncthreads()
            cuda.syncthreads()
        out[cuda.grid(1)] = 1.0

    out = np.zeros(96, dtype=np.float32)
    p = traced(two_barriers_in_block_zero, 3, 32, out)
    assert (p.barriers, p.min_block_barriers) == (2, 0)


# ---- the trusted side's check of a profile


def _genuine() -> dict:
    @cuda.jit
    def copy(x, out):
        i = cuda.grid(1)
        out[i] = x[i]

    x = np.zeros(64, dtype=np.float32)
    return traced(copy, 2, 32, x, np.zeros(64, dtype=np.float32)).to_plain()


def test_a_genuine_profile_round_trips():
    plain = _genuine()
    assert LaunchProfile.from_plain(plain).to_plain() == plain


@pytest.mark.parametrize(
    "forge",
    [
        lambda p: {**p, "version": 99},
        lambda p: {**p, "sites": [{**p["sites"][0], "sectors": 0}]},  # fewer sectors than requests
        lambda p: {**p, "sites": [{**p["sites"][0], "ideal_sectors": 10**6}]},
        lambda p: {**p, "sites": [{**p["sites"][0], "lanes": 10**6}]},
        lambda p: {**p, "sites": [{**p["sites"][0], "space": "texture"}]},
        lambda p: {**p, "sites": [{**p["sites"][0], "extra": 1}]},
        lambda p: {**p, "sites": [{**p["sites"][0], "requests": True}]},
        lambda p: {**p, "sites": [p["sites"][0]] * (memmodel.MAX_SITES + 1)},
        lambda p: {**p, "min_block_barriers": 5},
        lambda p: {**p, "grid": [1, 1]},
        lambda p: {**p, "version": 1},  # a version-1 profile: grouped the old way
        lambda p: {**p, "sites": [{**p["sites"][0], "serialised": 1}]},  # not an atomic
        lambda p: {**p, "sites": [{**p["sites"][0], "item": 6}]},  # not whole requests
    ],
)
def test_a_forged_profile_is_refused(forge):
    with pytest.raises(memmodel.ProfileError):
        LaunchProfile.from_plain(forge(_genuine()))


def test_places_name_the_students_lines_and_shared_variables():
    p = LaunchProfile.from_plain(_genuine())
    site = p.sites[0]
    shared = dataclasses.replace(
        site,
        array="shared@12",
        space=SHARED,
        max_ways=1,
        sectors=0,
        ideal_sectors=0,
        min_sectors=0,
        max_sectors=0,
    )
    named = memmodel.with_places(
        dataclasses.replace(p, sites=(site, shared)),
        {site.line: "line 40 of k.py"},
        {"shared@12": "tile"},
    )
    assert named.sites[0].where == "line 40 of k.py" and named.sites[1].array == "tile"


# ---- requests per dynamic instance of an instruction


def test_a_triangular_loop_is_grouped_by_iteration_not_by_each_lanes_nth_access():
    @cuda.jit
    def triangle(src, out):
        lane = cuda.threadIdx.x
        x = 0.0
        for r in range(32):
            if r >= lane:
                x += src[r, lane]  # iteration r: lanes 0..r read row r, contiguously
        out[lane] = x

    src = np.ones((32, 32), dtype=np.float32)
    read = only(traced(triangle, 1, 32, src, np.zeros(32, np.float32)), GLOBAL, LOAD, "a0")
    # iteration r: lanes 0..r active, (r + 1) floats of one row: ceil((r + 1) * 4 / 32) sectors
    assert read.requests == 32 and read.lanes == 528
    assert read.sectors == sum(-(-(r + 1) * 4 // 32) for r in range(32)) == 80
    assert read.divergent == 31


def test_a_device_function_called_on_both_sides_of_a_branch_is_two_instructions():
    @cuda.jit(device=True)
    def fetch(x, i):
        return x[i]

    @cuda.jit
    def branches(x, out):
        lane = cuda.threadIdx.x
        if lane % 2 == 0:
            out[lane] = fetch(x, 2 * lane)  # even lanes: every other float of 256 bytes
        else:
            out[lane] = fetch(x, 2 * lane + 1)  # odd lanes: the others

    x = np.zeros(64, dtype=np.float32)
    read = only(traced(branches, 1, 32, x, np.zeros(32, np.float32)), GLOBAL, LOAD, "a0")
    # two instructions of 16 lanes each, 8 sectors each (pairing them would give 1 request of 8)
    assert (read.requests, read.lanes, read.sectors, read.divergent) == (2, 32, 16, 2)


def test_nested_loops_whose_inner_trip_count_depends_on_the_lane():
    @cuda.jit
    def ragged(x, out):
        lane = cuda.threadIdx.x
        s = 0.0
        for r in range(2):
            for c in range(lane % 2 + 1):  # even lanes one pass, odd lanes two
                s += x[64 * r + 32 * c + lane]
        out[lane] = s

    x = np.zeros(128, dtype=np.float32)
    read = only(traced(ragged, 1, 32, x, np.zeros(32, np.float32)), GLOBAL, LOAD, "a0")
    # per r: pass c=0 by all 32 lanes (4 sectors), pass c=1 by the 16 odd lanes (4 sectors,
    # ideal 2): 4 requests, 16 sectors; a lane's n-th access would mix r=0's c=1 with r=1's c=0
    assert (read.requests, read.lanes, read.sectors, read.ideal_sectors) == (4, 96, 16, 12)


def test_bank_conflicts_on_stores_are_counted_and_said_per_operation():
    @cuda.jit
    def store_transposed(out, pad):
        tile = cuda.shared.array((32, 33), numba.float32)
        lane = cuda.threadIdx.x
        for r in range(4):
            tile[lane, r + pad] = r  # a column: 32-way unpadded (row stride 33 words: none)
        cuda.syncthreads()
        out[lane] = tile[0, lane]

    conflicted = traced(store_transposed, 1, 32, np.zeros(32, np.float32), 0)
    assert conflicted.max_ways(STORE) == 1  # rows of 33 words: lane l in bank (33 l + r) % 32
    assert conflicted.bank_conflicts(STORE) == 0 and conflicted.max_ways(LOAD) == 1

    @cuda.jit
    def store_unpadded(out):
        tile = cuda.shared.array((32, 32), numba.float32)
        lane = cuda.threadIdx.x
        for r in range(4):
            tile[lane, r] = r  # a column of an unpadded tile: every lane in bank r
        cuda.syncthreads()
        out[lane] = tile[0, lane]

    p = traced(store_unpadded, 1, 32, np.zeros(32, np.float32))
    store = only(p, SHARED, STORE)
    assert (store.requests, store.max_ways, store.wavefronts, store.bank_conflicts) == (
        4,
        32,
        128,
        124,
    )
    assert p.bank_conflicts(STORE) == 124 and p.bank_conflicts(LOAD) == 0


def test_same_address_atomics_are_serialised():
    @cuda.jit
    def histogram(hist, bins):
        cuda.atomic.add(hist, cuda.threadIdx.x % bins, 1)

    for bins, serialised in ((1, 31), (4, 28), (32, 0)):
        p = traced(histogram, 1, 32, np.zeros(32, np.int32), bins)
        atomic = only(p, GLOBAL, ATOMIC)
        assert (atomic.serialised, atomic.transactions, p.serialised) == (
            serialised,
            1 + serialised,
            serialised,
        )


def test_a_complex128_is_two_eight_byte_requests_in_global_and_shared_memory():
    @cuda.jit
    def copy_through_shared(x, out):
        tile = cuda.shared.array(32, numba.complex128)
        lane = cuda.threadIdx.x
        tile[lane] = x[lane]
        cuda.syncthreads()
        out[lane] = tile[lane]

    x = np.zeros(32, dtype=np.complex128)
    p = traced(copy_through_shared, 1, 32, x, np.zeros(32, np.complex128))
    read = only(p, GLOBAL, LOAD, "a0")
    # each half: 8 bytes every 16 over 512 bytes, 16 sectors; the elements' ideal is 16 too
    assert (read.requests, read.itemsize, read.item, read.sectors, read.ideal_sectors) == (
        2,
        8,
        16,
        32,
        32,
    )
    assert read.accesses == 32 and p.array("a0").loads == 32
    back = only(p, SHARED, LOAD)
    # a half in 2 phases of 16 lanes; lanes l and l + 8 of a phase hit the same banks: 2 ways
    assert (back.requests, back.max_ways, back.wavefronts, back.ideal_wavefronts) == (2, 2, 8, 4)


def test_the_global_budget_counts_every_access_of_every_global_array():
    @cuda.jit
    def accumulate_in_global(a, c):
        lane = cuda.threadIdx.x
        for k in range(4):
            c[lane] += a[k, lane]  # a load of a, a load and a store of c, each iteration

    p = traced(accumulate_in_global, 1, 32, np.ones((4, 32), np.float32), np.zeros(32, np.float32))
    assert p.array("a1").loads == p.array("a1").stores == 128 and p.array("a0").loads == 128
    assert p.global_accesses == 384 and p.global_requests == 12


def test_range_loops_through_enumerate_zip_and_a_broken_loop_count_their_iterations():
    @cuda.jit
    def shapes(src, out):
        lane = cuda.threadIdx.x
        x = 0.0
        for _, r in enumerate(range(32)):  # the triangle again, through enumerate
            if r >= lane:
                x += src[r, lane]
        for r, _ in zip(range(32), range(32)):  # noqa: B905  # and through zip (Numba: no strict=)
            if r >= lane:
                x += src[r, lane]
        for r in range(1):  # a loop with no jump back (its body always breaks)
            x += src[r, lane]
            break
        out[lane] = x

    src = np.ones((32, 32), dtype=np.float32)
    p = traced(shapes, 1, 32, src, np.zeros(32, np.float32))
    first, second, third = sorted(p.where(GLOBAL, LOAD, "a0"), key=lambda s: s.line)
    assert (first.requests, first.sectors) == (second.requests, second.sectors) == (32, 80)
    assert (third.requests, third.sectors) == (1, 4)


def test_a_while_loop_pairs_each_lanes_nth_access_as_before():
    @cuda.jit
    def grid_stride(x, out):
        i = cuda.grid(1)
        s = 0.0
        while i < x.size:  # not a range: its iterations are not counted
            s += x[i]
            i += 32
        out[cuda.grid(1)] = s

    x = np.zeros(40, dtype=np.float32)
    read = only(traced(grid_stride, 1, 32, x, np.zeros(32, np.float32)), GLOBAL, LOAD, "a0")
    # pass 0: 32 lanes, 4 sectors; pass 1: lanes 0..7 read x[32..39], 1 sector (lanes iterate
    # alike, so the n-th access of each lane is the n-th pass: right here)
    assert (read.requests, read.lanes, read.sectors, read.divergent) == (2, 40, 5, 1)
