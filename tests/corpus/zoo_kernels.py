"""The style zoo: kernels written as students write them, right and wrong (issue 49 item 8).

Each `Variant` (tests/corpus/memory_kernels.py) replaces one kernel of the gpu_fundamentals
reference. The correct ones use a style the notebook allows and must keep every point; each wrong
one computes the right answer on a GPU-like schedule only by luck (or computes it, but skips the
lesson) and must lose exactly its `loses` tests. The kernels are graded grouped, one variant per
kernel in a submission (`SUBMISSIONS`), so that the sandbox grades 30-odd kernels in a handful of
gradings (tests/corpus/cases_zoo.py).
"""

from __future__ import annotations

from memory_kernels import (
    FAKE_MATMUL_ATOMICS_ON_C,
    FAKE_MATMUL_SUMS_IN_C,
    FAKE_NAIVE_EDGE_TILES,
    FAKE_STORE_CONFLICTS,
    FAKE_WARP_SUM_LANE0_LOOP,
    FAKE_WARP_SUM_SHARED,
    MATMUL_B_IN_REGISTERS,
    MATMUL_PADDED_2D,
    STRIDED_GRID_STRIDE,
    WARP_SUM_SYNCWARP_SHARED_FREE,
    WARP_SUM_XOR_BUTTERFLY,
    Variant,
)

# ---------------------------------------------------------------------------- correct styles

VECTOR_ADD_GRID_STRIDE = """\
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, c.size, step):
        c[i] = a[i] + b[i]
"""

VECTOR_ADD_DEVICE_FUNCTION_PRELUDE = """\
@cuda.jit(device=True)
def plus(x, y):
    return x + y"""

VECTOR_ADD_DEVICE_FUNCTION = """\
    i = cuda.grid(1)
    if i < len(c):
        c[i] = plus(a[i], b[i])
"""

TRANSPOSE_NAIVE_THROUGH_A_VIEW = """\
    x, y = cuda.grid(2)
    if y < src.shape[0] and x < src.shape[1]:
        dst[x, y] = src.T[x, y]
"""

TRANSPOSE_NAIVE_ROW_LOOP = """\
    x, y0 = cuda.grid(2)
    rows, cols = src.shape
    for y in range(y0, rows, cuda.gridsize(2)[1]):
        if x < cols:
            dst[x, y] = src[y, x]
"""

TRANSPOSE_TILED_SWIZZLED = """\
    tile = cuda.shared.array((TILE, TILE), numba.float32)
    lane = cuda.threadIdx.x
    r0, c0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
    for r in range(TILE):
        if r0 + r < src.shape[0] and c0 + lane < src.shape[1]:
            tile[r, (lane + r) % TILE] = src[r0 + r, c0 + lane]
    cuda.syncthreads()
    for r in range(TILE):
        if c0 + r < dst.shape[0] and r0 + lane < dst.shape[1]:
            dst[c0 + r, r0 + lane] = tile[lane, (r + lane) % TILE]
"""

TRANSPOSE_TILED_SYNCWARP = """\
    tile = cuda.shared.array((TILE, TILE_PADDED), numba.float32)
    lane = cuda.threadIdx.x  # one warp per block: syncwarp orders the whole block
    r0, c0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
    for r in range(TILE):
        if r0 + r < src.shape[0] and c0 + lane < src.shape[1]:
            tile[r, lane] = src[r0 + r, c0 + lane]
    cuda.syncwarp()
    for r in range(TILE):
        if c0 + r < dst.shape[0] and r0 + lane < dst.shape[1]:
            dst[c0 + r, r0 + lane] = tile[lane, r]
"""

TRANSPOSE_TILED_PASSES_PRELUDE = """\
TILE = 32  # the student's own cell says it again: the same value
ROWS_PER_PASS, PASSES = 4, TILE // 4"""

TRANSPOSE_TILED_PASSES = """\
    tile = cuda.shared.array((TILE, TILE_PADDED), numba.float32)
    lane = cuda.threadIdx.x
    r0, c0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
    for p in range(PASSES):
        for q in range(ROWS_PER_PASS):
            r = p * ROWS_PER_PASS + q
            if r0 + r < src.shape[0] and c0 + lane < src.shape[1]:
                tile[r, lane] = src[r0 + r, c0 + lane]
    cuda.syncthreads()
    for r, _ in enumerate(range(TILE)):
        if c0 + r < dst.shape[0] and r0 + lane < dst.shape[1]:
            dst[c0 + r, r0 + lane] = tile[lane, r]
"""

MATMUL_NAIVE_DIVMOD_PRELUDE = """\
TILE = 32  # written again in the student's own cell: the same value"""

MATMUL_NAIVE_DIVMOD = """\
    t = cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x
    dy, dx = divmod(t, cuda.blockDim.x)
    x = cuda.blockIdx.x * cuda.blockDim.x + dx
    y = cuda.blockIdx.y * cuda.blockDim.y + dy
    if y < c.shape[0] and x < c.shape[1]:
        acc = numba.float32(0.0)
        for k in range(a.shape[1]):
            acc += a[y, k] * b[k, x]
        c[y, x] = acc
"""

MATMUL_NAIVE_ZIP = """\
    x, y = cuda.grid(2)
    if y < c.shape[0] and x < c.shape[1]:
        acc = numba.float32(0.0)
        row, col = a[y], b.T[x]
        for u, v in zip(row, col):
            acc += u * v
        c[y, x] = acc
"""

MATMUL_NAIVE_GRID_STRIDE = """\
    x0, y0 = cuda.grid(2)
    sx, sy = cuda.gridsize(2)
    for y in range(y0, c.shape[0], sy):
        for x in range(x0, c.shape[1], sx):
            acc = numba.float32(0.0)
            for k in range(a.shape[1]):
                acc += a[y, k] * b[k, x]
            c[y, x] = acc
"""

MATMUL_TWO_TILES_ONE_STATEMENT = """\
    a_tile, b_tile = cuda.shared.array((TILE, TILE), numba.float32), cuda.shared.array(
        (TILE, TILE), numba.float32
    )
    acc = cuda.local.array(TILE, numba.float32)
    lane = cuda.threadIdx.x
    row0, col = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE + cuda.threadIdx.x
    for r in range(TILE):
        acc[r] = 0.0
    for k0 in range(0, a.shape[1], TILE):
        for r in range(TILE):
            inside_a = row0 + r < a.shape[0] and k0 + lane < a.shape[1]
            a_tile[r, lane] = a[row0 + r, k0 + lane] if inside_a else numba.float32(0.0)
            inside_b = k0 + r < b.shape[0] and col < b.shape[1]
            b_tile[r, lane] = b[k0 + r, col] if inside_b else numba.float32(0.0)
        cuda.syncthreads()
        for k in range(TILE):
            for r in range(TILE):
                acc[r] += a_tile[r, k] * b_tile[k, lane]
        cuda.syncthreads()
    for r in range(TILE):
        if row0 + r < c.shape[0] and col < c.shape[1]:
            c[row0 + r, col] = acc[r]
"""

STRIDED_RENAMED = Variant(
    "strided_copy(source, target, stride), the reference's body",
    "strided_copy",
    "",
    rename=(("src", "source"), ("dst", "target")),
)

# ------------------------------------------------------------------------------ wrong ones

VECTOR_ADD_RACE_BY_THREAD_ORDER = """\
    staged = cuda.shared.array(1024, numba.float64)  # exact for float32 and float64
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < c.size:
        staged[t] = a[i]
    # no barrier: thread t reads what thread t - 1 staged; the simulator ran t - 1 first
    if i < c.size:
        left = staged[t - 1] if t > 0 else a[i]
        c[i] = (a[i] if t == 0 else left - a[i - 1] + a[i]) + b[i]
"""

VECTOR_ADD_READS_PAST_THE_END = """\
    i = cuda.grid(1)
    if i < c.size:
        c[i] = a[i - a.size] + b[i]  # before a: numpy wraps it to a[i]; a GPU reads elsewhere
"""

STRIDED_NEGATIVE_INDEX = """\
    i = cuda.grid(1)
    if i < dst.size:
        j = (i * stride) % src.size
        dst[i] = src[j - src.size]  # numpy would wrap it; CUDA reads before the array
"""

TRANSPOSE_NAIVE_WRITES_COALESCED = """\
    x, y = cuda.grid(2)
    if y < src.shape[0] and x < src.shape[1]:
        r, c = divmod(y * src.shape[1] + x, src.shape[0])  # the lanes walk a row of dst
        dst[r, c] = src.T[r, c]
"""

TRANSPOSE_TILED_DECOY_VIEW = """\
    tile = cuda.shared.array((TILE, TILE_PADDED), numba.float32)
    lane = cuda.threadIdx.x
    r0, c0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
    tile[0, lane] = 0.0
    cuda.syncthreads()
    decoy = tile[0, lane]
    for r in range(TILE):
        if c0 + r < dst.shape[0] and r0 + lane < dst.shape[1]:
            dst[c0 + r, r0 + lane] = src.T[c0 + r, r0 + lane] + decoy
"""

TRANSPOSE_TILED_NO_BARRIER = """\
    tile = cuda.shared.array((TILE, TILE_PADDED), numba.float32)
    lane = cuda.threadIdx.x
    r0, c0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
    for r in range(TILE):
        if r0 + r < src.shape[0] and c0 + lane < src.shape[1]:
            tile[r, lane] = src[r0 + r, c0 + lane]
    for r in range(TILE):
        if c0 + r < dst.shape[0] and r0 + lane < dst.shape[1]:
            dst[c0 + r, r0 + lane] = tile[lane, r]
"""

MATMUL_UNINITIALISED_EDGES = """\
    a_tile = cuda.shared.array((TILE, TILE), numba.float32)
    b_tile = cuda.shared.array((TILE, TILE), numba.float32)
    acc = cuda.local.array(TILE, numba.float32)
    lane = cuda.threadIdx.x
    row0, col = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE + lane
    for r in range(TILE):
        acc[r] = 0.0
    for k0 in range(0, a.shape[1], TILE):
        for r in range(TILE):  # the elements outside the matrices are never written
            if row0 + r < a.shape[0] and k0 + lane < a.shape[1]:
                a_tile[r, lane] = a[row0 + r, k0 + lane]
            if k0 + r < b.shape[0] and col < b.shape[1]:
                b_tile[r, lane] = b[k0 + r, col]
        cuda.syncthreads()
        for k in range(TILE):  # past K, the tiles hold what nothing wrote (or a stale step)
            for r in range(TILE):
                acc[r] += a_tile[r, k] * b_tile[k, lane]
        cuda.syncthreads()
    for r in range(TILE):
        if row0 + r < c.shape[0] and col < c.shape[1]:
            c[row0 + r, col] = acc[r]
"""

MATMUL_DECOY_TILES_VIEWS = """\
    a_tile = cuda.shared.array((TILE, TILE), numba.float32)
    b_tile = cuda.shared.array((TILE, TILE), numba.float32)
    lane = cuda.threadIdx.x
    row0, col = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE + lane
    a_tile[0, lane] = 0.0
    b_tile[0, lane] = 0.0
    cuda.syncthreads()
    bt = b.T
    if col < c.shape[1]:
        for r in range(TILE):
            if row0 + r < c.shape[0]:
                acc = a_tile[0, lane] + b_tile[0, lane]
                for k in range(a.shape[1]):
                    acc += a[row0 + r, k] * bt[col, k]
                c[row0 + r, col] = acc
"""

WARP_SUM_EARLY_RETURN = """\
    i = cuda.grid(1)
    if i >= x.size:
        return  # the lanes past the end leave, but the mask still names them
    value = x[i]
    for delta in (16, 8, 4, 2, 1):
        value += cuda.shfl_down_sync(0xFFFFFFFF, value, delta)
    if cuda.threadIdx.x % 32 == 0:
        out[i // 32] = value
"""

# The hidden and public tests of each kernel (a wrong kernel's lesson is all of them when its
# result is wrong, or the one memory lesson it skips when its result is right).
ALL_TESTS = {
    "vector_add": frozenset(
        {
            "test_vector_add_small",
            "test_gpu_vector_add_small",
            "test_vector_add_sizes",
            "test_vector_add_float64",
            "test_vector_add_compiles_to_ptx",
            "test_gpu_vector_add_random",
        }
    ),
    "strided_copy": frozenset(
        {
            "test_coalescing_slowdown_runs",  # it launches the student's strided_copy
            "test_strided_copy_small",
            "test_strided_copy_strides",
            "test_strided_copy_compiles_to_ptx",
            "test_strided_copy_sectors_match_the_model",
        }
    ),
    "transpose_tiled": frozenset(
        {
            "test_transpose_tiled_small",
            "test_transpose_tiled_shapes",
            "test_transpose_tiled_compiles_to_ptx",
            "test_transpose_tiled_coalesces_both_ways",
            "test_transpose_tiled_moves_each_element_once",
            "test_transpose_tiled_reads_the_tile_without_bank_conflicts",
        }
    ),
    "warp_sum": frozenset(
        {
            "test_warp_sum_small",
            "test_warp_sum_sizes",
            "test_warp_sum_compiles_to_ptx",
            "test_warp_sum_keeps_to_registers",
        }
    ),
}
MATMUL_TILED_SHAPES = frozenset(
    {"test_matmul_tiled_small", "test_matmul_tiled_shapes", "test_matmul_tiled_compiles_to_ptx"}
)
REUSE = frozenset({"test_matmul_tiled_reuses_each_load"})
TILED_COALESCED = frozenset({"test_transpose_tiled_coalesces_both_ways"})
TILED_ONCE = frozenset({"test_transpose_tiled_moves_each_element_once"})
TILED_BANKS = frozenset({"test_transpose_tiled_reads_the_tile_without_bank_conflicts"})
WARP_REGISTERS = frozenset({"test_warp_sum_keeps_to_registers"})


def _v(name: str, kernel: str, body: str, loses: frozenset[str] = frozenset(), **kw) -> Variant:
    return Variant(name, kernel, body, loses, **kw)


CORRECT = (
    # submission 1
    (
        _v("grid-stride loop", "vector_add", VECTOR_ADD_GRID_STRIDE),
        STRIDED_RENAMED,
        _v("dst[x, y] = src.T[x, y] (a view)", "transpose_naive", TRANSPOSE_NAIVE_THROUGH_A_VIEW),
        _v("swizzled unpadded tile", "transpose_tiled", TRANSPOSE_TILED_SWIZZLED),
        _v(
            "divmod of a flat thread index, constants in its cell",
            "matmul_naive",
            MATMUL_NAIVE_DIVMOD,
            prelude=MATMUL_NAIVE_DIVMOD_PRELUDE,
        ),
        _v("two tiles in one statement", "matmul_tiled", MATMUL_TWO_TILES_ONE_STATEMENT),
        _v("xor butterfly, divmod", "warp_sum", WARP_SUM_XOR_BUTTERFLY),
    ),
    # submission 2
    (
        _v(
            "a device function, len()",
            "vector_add",
            VECTOR_ADD_DEVICE_FUNCTION,
            prelude=VECTOR_ADD_DEVICE_FUNCTION_PRELUDE,
        ),
        _v("grid-stride loop", "strided_copy", STRIDED_GRID_STRIDE),
        _v("2-D blocks with a row loop", "transpose_naive", TRANSPOSE_NAIVE_ROW_LOOP),
        _v("syncwarp in one-warp blocks", "transpose_tiled", TRANSPOSE_TILED_SYNCWARP),
        _v("2-D grid-stride loops", "matmul_naive", MATMUL_NAIVE_GRID_STRIDE),
        _v("register blocking: b's column in a register", "matmul_tiled", MATMUL_B_IN_REGISTERS),
        _v("laneid, activemask, syncwarp", "warp_sum", WARP_SUM_SYNCWARP_SHARED_FREE),
    ),
    # submission 3
    (
        _v(
            "constants rebound and tuple-bound, enumerate",
            "transpose_tiled",
            TRANSPOSE_TILED_PASSES,
            prelude=TRANSPOSE_TILED_PASSES_PRELUDE,
        ),
        _v("padded tiles, 2-D blocks", "matmul_tiled", MATMUL_PADDED_2D),
        _v(
            "params renamed (A, B, C)",
            "vector_add",
            "",
            rename=(("a", "A"), ("b", "B"), ("c", "C")),
        ),
        _v(
            "params renamed (inp, sums)",
            "warp_sum",
            "",
            rename=(("x", "inp"), ("out", "sums")),
        ),
        _v("zip over a row and a view's row", "matmul_naive", MATMUL_NAIVE_ZIP),
    ),
)

WRONG = (
    # submission 1
    (
        _v(
            "race hidden by thread order (shared, no barrier)",
            "vector_add",
            VECTOR_ADD_RACE_BY_THREAD_ORDER,
            ALL_TESTS["vector_add"],
        ),
        _v(
            "writes coalesced, reads strided through .T",
            "transpose_naive",
            TRANSPOSE_NAIVE_WRITES_COALESCED,
            frozenset({"test_transpose_naive_reads_coalesced_writes_strided"}),
        ),
        _v(
            "decoy tile, strided reads through src.T",
            "transpose_tiled",
            TRANSPOSE_TILED_DECOY_VIEW,
            TILED_COALESCED,
        ),
        _v("sums accumulated in global c", "matmul_tiled", FAKE_MATMUL_SUMS_IN_C, REUSE),
        _v("shared memory and a barrier", "warp_sum", FAKE_WARP_SUM_SHARED, WARP_REGISTERS),
    ),
    # submission 2
    (
        _v(
            "out-of-bounds read (negative index) that returns the right value",
            "strided_copy",
            STRIDED_NEGATIVE_INDEX,
            ALL_TESTS["strided_copy"],
        ),
        _v(
            "tile stored transposed into an unpadded array",
            "transpose_tiled",
            FAKE_STORE_CONFLICTS,
            TILED_BANKS,
        ),
        _v("atomics on c", "matmul_tiled", FAKE_MATMUL_ATOMICS_ON_C, REUSE),
        _v("lane 0 sums alone", "warp_sum", FAKE_WARP_SUM_LANE0_LOOP, WARP_REGISTERS),
    ),
    # submission 3
    (
        _v(
            "out-of-bounds read (negative index) of a that returns a[i]",
            "vector_add",
            VECTOR_ADD_READS_PAST_THE_END,
            ALL_TESTS["vector_add"],
        ),
        _v(
            "whole tiles tiled, edge tiles copied naively",
            "transpose_tiled",
            FAKE_NAIVE_EDGE_TILES,
            TILED_COALESCED | TILED_ONCE,
        ),
        _v("decoy tiles, reads through b.T", "matmul_tiled", MATMUL_DECOY_TILES_VIEWS, REUSE),
        _v(
            "early return past the end, full mask",
            "warp_sum",
            WARP_SUM_EARLY_RETURN,
            ALL_TESTS["warp_sum"],
        ),
    ),
    # submission 4
    (
        _v(
            "missing barrier",
            "transpose_tiled",
            TRANSPOSE_TILED_NO_BARRIER,
            ALL_TESTS["transpose_tiled"],
        ),
        _v(
            "uninitialised shared reads at the edges",
            "matmul_tiled",
            MATMUL_UNINITIALISED_EDGES,
            MATMUL_TILED_SHAPES,
        ),
    ),
)

# Tests a wrong kernel may pass on some draws, by design of the test, not of the grader: with
# n = 1 (test_vector_add_sizes[tiny] draws 1 to 8 elements) one thread runs and nothing races.
MAY_PASS = {"vector_add": ("test_vector_add_sizes[tiny]",)}
