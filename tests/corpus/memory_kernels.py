"""Kernels written as students write them, for the memory lessons' unit test and corpus cases.

Each entry replaces one kernel's solution region of the gpu_fundamentals reference with another
body. The correct ones are other designs than the reference (a kernel written for 2-D blocks, a
padded matmul tile, a grid-stride loop, a tile stored transposed); the fakes skip one lesson
while computing the right answer: a tile declared but bypassed, strided writes that survive the
tiling, tiles filled and then ignored, a "tiled" matmul that is the naive one, tiling in only
some blocks, an unpadded tile read by column. (A matmul that tiles `a` and keeps each element of
`b` in a register across the tile's rows loads each element once per block, exactly as the
reference does: register reuse is reuse, and it keeps its points.) Each fake's `loses` says which
hidden tests it must fail, and no other.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass


@dataclass(frozen=True)
class Variant:
    name: str
    kernel: str
    body: str  # the kernel's new body, indented by 4, replacing its solution region ("": kept)
    loses: frozenset[str] = frozenset()  # the hidden tests it must fail (empty: full marks)
    # parameters renamed (old, new): in the def line and in the body (the reference's own body
    # when `body` is ""): the tests address arrays by position, never by the reference's names
    rename: tuple[tuple[str, str], ...] = ()
    prelude: str = ""  # lines the student's cell holds before the kernel (constants, helpers)


TRANSPOSE_2D = """\
    tile = cuda.shared.array((TILE, TILE_PADDED), numba.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    bx, by = cuda.blockIdx.x * TILE, cuda.blockIdx.y * TILE
    rows, cols = src.shape
    for r in range(ty, TILE, cuda.blockDim.y):
        if by + r < rows and bx + tx < cols:
            tile[r, tx] = src[by + r, bx + tx]
    cuda.syncthreads()
    for r in range(ty, TILE, cuda.blockDim.y):
        if bx + r < cols and by + tx < rows:
            dst[bx + r, by + tx] = tile[tx, r]
"""

TRANSPOSE_STORED_TRANSPOSED = """\
    t = cuda.shared.array((TILE, TILE_PADDED), numba.float32)
    lane = cuda.threadIdx.x
    r0 = cuda.blockIdx.y * TILE
    c0 = cuda.blockIdx.x * TILE
    for i in range(TILE):
        if r0 + i < src.shape[0] and c0 + lane < src.shape[1]:
            t[lane, i] = src[r0 + i, c0 + lane]
    cuda.syncthreads()
    for i in range(TILE):
        if c0 + i < dst.shape[0] and r0 + lane < dst.shape[1]:
            dst[c0 + i, r0 + lane] = t[i, lane]
"""

FAKE_TILE_BYPASSED = """\
    tile = cuda.shared.array((TILE, TILE_PADDED), numba.float32)
    lane = cuda.threadIdx.x
    tile[0, lane] = 0.0
    cuda.syncthreads()
    row0 = cuda.blockIdx.y * TILE
    col = cuda.blockIdx.x * TILE + lane
    for r in range(TILE):
        if row0 + r < src.shape[0] and col < src.shape[1]:
            dst[col, row0 + r] = src[row0 + r, col]
"""

FAKE_STRIDED_WRITES = """\
    tile = cuda.shared.array((TILE, TILE_PADDED), numba.float32)
    lane = cuda.threadIdx.x
    row0 = cuda.blockIdx.y * TILE
    col0 = cuda.blockIdx.x * TILE
    for r in range(TILE):
        if row0 + r < src.shape[0] and col0 + lane < src.shape[1]:
            tile[r, lane] = src[row0 + r, col0 + lane]
    cuda.syncthreads()
    for r in range(TILE):
        if row0 + r < src.shape[0] and col0 + lane < src.shape[1]:
            dst[col0 + lane, row0 + r] = tile[r, lane]
"""

FAKE_SOME_BLOCKS = """\
    tile = cuda.shared.array((TILE, TILE_PADDED), numba.float32)
    lane = cuda.threadIdx.x
    row0 = cuda.blockIdx.y * TILE
    col0 = cuda.blockIdx.x * TILE
    if cuda.blockIdx.x == 0:
        for r in range(TILE):
            if row0 + r < src.shape[0] and col0 + lane < src.shape[1]:
                tile[r, lane] = src[row0 + r, col0 + lane]
        cuda.syncthreads()
        for r in range(TILE):
            if col0 + r < dst.shape[0] and row0 + lane < dst.shape[1]:
                dst[col0 + r, row0 + lane] = tile[lane, r]
    else:
        for r in range(TILE):
            if row0 + r < src.shape[0] and col0 + lane < src.shape[1]:
                dst[col0 + lane, row0 + r] = src[row0 + r, col0 + lane]
"""

FAKE_UNPADDED = """\
    tile = cuda.shared.array((TILE, TILE), numba.float32)
    lane = cuda.threadIdx.x
    row0 = cuda.blockIdx.y * TILE
    col0 = cuda.blockIdx.x * TILE
    for r in range(TILE):
        if row0 + r < src.shape[0] and col0 + lane < src.shape[1]:
            tile[r, lane] = src[row0 + r, col0 + lane]
    cuda.syncthreads()
    for r in range(TILE):
        if col0 + r < dst.shape[0] and row0 + lane < dst.shape[1]:
            dst[col0 + r, row0 + lane] = tile[lane, r]
"""

MATMUL_PADDED_2D = """\
    sa = cuda.shared.array((TILE, TILE_PADDED), numba.float32)
    sb = cuda.shared.array((TILE, TILE_PADDED), numba.float32)
    sums = cuda.local.array(TILE, numba.float32)
    tx, ty, step = cuda.threadIdx.x, cuda.threadIdx.y, cuda.blockDim.y
    i0 = cuda.blockIdx.y * TILE
    j = cuda.blockIdx.x * TILE + tx
    m, kk, n = a.shape[0], a.shape[1], b.shape[1]
    for r in range(TILE):
        sums[r] = numba.float32(0.0)
    for k0 in range(0, kk, TILE):
        for r in range(ty, TILE, step):
            sa[r, tx] = a[i0 + r, k0 + tx] if i0 + r < m and k0 + tx < kk else numba.float32(0.0)
            sb[r, tx] = b[k0 + r, j] if k0 + r < kk and j < n else numba.float32(0.0)
        cuda.syncthreads()
        for r in range(ty, TILE, step):
            s = sums[r]
            for k in range(TILE):
                s += sa[r, k] * sb[k, tx]
            sums[r] = s
        cuda.syncthreads()
    for r in range(ty, TILE, step):
        if i0 + r < m and j < n:
            c[i0 + r, j] = sums[r]
"""

FAKE_MATMUL_BYPASSED = """\
    a_tile = cuda.shared.array((TILE, TILE), numba.float32)
    b_tile = cuda.shared.array((TILE, TILE), numba.float32)
    lane = cuda.threadIdx.x
    row0 = cuda.blockIdx.y * TILE
    col = cuda.blockIdx.x * TILE + lane
    for r in range(TILE):
        a_tile[r, lane] = 0.0
        if row0 + r < a.shape[0] and lane < a.shape[1]:
            a_tile[r, lane] = a[row0 + r, lane]
        b_tile[r, lane] = 0.0
        if r < b.shape[0] and col < b.shape[1]:
            b_tile[r, lane] = b[r, col]
    cuda.syncthreads()
    if col < c.shape[1]:
        for r in range(TILE):
            if row0 + r < c.shape[0]:
                acc = numba.float32(0.0)
                for k in range(a.shape[1]):
                    acc += a[row0 + r, k] * b[k, col]
                c[row0 + r, col] = acc
"""

MATMUL_B_IN_REGISTERS = """\
    a_tile = cuda.shared.array((TILE, TILE), numba.float32)
    lane = cuda.threadIdx.x
    row0 = cuda.blockIdx.y * TILE
    col = cuda.blockIdx.x * TILE + lane
    acc = cuda.local.array(TILE, numba.float32)
    for r in range(TILE):
        acc[r] = 0.0
    for k0 in range(0, a.shape[1], TILE):
        for r in range(TILE):
            a_tile[r, lane] = 0.0
            if row0 + r < a.shape[0] and k0 + lane < a.shape[1]:
                a_tile[r, lane] = a[row0 + r, k0 + lane]
        cuda.syncthreads()
        for k in range(TILE):
            if k0 + k < b.shape[0] and col < b.shape[1]:
                value = b[k0 + k, col]
                for r in range(TILE):
                    acc[r] += a_tile[r, k] * value
        cuda.syncthreads()
    if col < c.shape[1]:
        for r in range(TILE):
            if row0 + r < c.shape[0]:
                c[row0 + r, col] = acc[r]
"""

FAKE_MATMUL_NAIVE = """\
    lane = cuda.threadIdx.x
    row0 = cuda.blockIdx.y * TILE
    col = cuda.blockIdx.x * TILE + lane
    if col < c.shape[1]:
        for r in range(TILE):
            if row0 + r < c.shape[0]:
                acc = numba.float32(0.0)
                for k in range(a.shape[1]):
                    acc += a[row0 + r, k] * b[k, col]
                c[row0 + r, col] = acc
"""

STRIDED_GRID_STRIDE = """\
    start = cuda.grid(1)
    step = cuda.gridsize(1)
    n = src.size
    for i in range(start, dst.size, step):
        dst[i] = src[(i * stride) % n]
"""

FAKE_NAIVE_EDGE_TILES = """\
    tile = cuda.shared.array((TILE, TILE_PADDED), numba.float32)
    lane = cuda.threadIdx.x
    row0 = cuda.blockIdx.y * TILE
    col0 = cuda.blockIdx.x * TILE
    if row0 + TILE <= src.shape[0] and col0 + TILE <= src.shape[1]:
        for r in range(TILE):
            tile[r, lane] = src[row0 + r, col0 + lane]
        cuda.syncthreads()
        for r in range(TILE):
            dst[col0 + r, row0 + lane] = tile[lane, r]
    else:
        for r in range(TILE):
            if row0 + r < src.shape[0] and col0 + lane < src.shape[1]:
                dst[col0 + lane, row0 + r] = src[row0 + r, col0 + lane]
"""

FAKE_STORE_CONFLICTS = """\
    tile = cuda.shared.array((TILE, TILE), numba.float32)
    lane = cuda.threadIdx.x
    r0 = cuda.blockIdx.y * TILE
    c0 = cuda.blockIdx.x * TILE
    for i in range(TILE):
        if r0 + i < src.shape[0] and c0 + lane < src.shape[1]:
            tile[lane, i] = src[r0 + i, c0 + lane]
    cuda.syncthreads()
    for i in range(TILE):
        if c0 + i < dst.shape[0] and r0 + lane < dst.shape[1]:
            dst[c0 + i, r0 + lane] = tile[i, lane]
"""

_MATMUL_STAGE = """\
    a_tile = cuda.shared.array((TILE, TILE), numba.float32)
    b_tile = cuda.shared.array((TILE, TILE), numba.float32)
    lane = cuda.threadIdx.x
    row0 = cuda.blockIdx.y * TILE
    col = cuda.blockIdx.x * TILE + lane
    if col < c.shape[1]:
        for r in range(TILE):
            if row0 + r < c.shape[0]:
                c[row0 + r, col] = 0.0
    for k0 in range(0, a.shape[1], TILE):
        for r in range(TILE):
            a_tile[r, lane] = 0.0
            if row0 + r < a.shape[0] and k0 + lane < a.shape[1]:
                a_tile[r, lane] = a[row0 + r, k0 + lane]
            b_tile[r, lane] = 0.0
            if k0 + r < b.shape[0] and col < b.shape[1]:
                b_tile[r, lane] = b[k0 + r, col]
        cuda.syncthreads()
        if col < c.shape[1]:
            for k in range(TILE):
                for r in range(TILE):
                    if row0 + r < c.shape[0]:
"""

FAKE_MATMUL_SUMS_IN_C = (
    _MATMUL_STAGE
    + """\
                        c[row0 + r, col] += a_tile[r, k] * b_tile[k, lane]
        cuda.syncthreads()
"""
)

FAKE_MATMUL_ATOMICS_ON_C = (
    _MATMUL_STAGE
    + """\
                        cuda.atomic.add(c, (row0 + r, col), a_tile[r, k] * b_tile[k, lane])
        cuda.syncthreads()
"""
)

WARP_SUM_XOR_BUTTERFLY = """\
    i = cuda.grid(1)
    v = x[i] if i < x.size else numba.float32(0.0)
    for k in range(5):  # a butterfly: every lane ends with the sum
        v += cuda.shfl_xor_sync(0xFFFFFFFF, v, 16 >> k)
    w, lane = divmod(i, 32)
    if lane == 0 and w < out.size:
        out[w] = v
"""

WARP_SUM_SYNCWARP_SHARED_FREE = """\
    i = cuda.grid(1)
    lane = cuda.laneid
    total = x[i] if i < x.size else numba.float32(0.0)
    for delta in (16, 8, 4, 2, 1):
        total += cuda.shfl_down_sync(cuda.activemask(), total, delta)
    cuda.syncwarp()
    if lane == 0 and i // 32 < out.size:
        out[i // 32] = total
"""

FAKE_WARP_SUM_SHARED = """\
    buf = cuda.shared.array(1024, numba.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    buf[t] = x[i] if i < x.size else numba.float32(0.0)
    cuda.syncthreads()
    if t % 32 == 0 and i // 32 < out.size:
        s = numba.float32(0.0)
        for k in range(32):
            s += buf[t + k]
        out[i // 32] = s
"""

FAKE_WARP_SUM_LANE0_LOOP = """\
    i = cuda.grid(1)
    if i % 32 == 0 and i // 32 < out.size:
        s = numba.float32(0.0)
        for k in range(32):
            if i + k < x.size:
                s += x[i + k]
        out[i // 32] = s
"""

WARP_SUM_TESTS = frozenset({"test_warp_sum_keeps_to_registers"})

TILED_TESTS = frozenset(
    {
        "test_transpose_tiled_coalesces_both_ways",
        "test_transpose_tiled_moves_each_element_once",
        "test_transpose_tiled_reads_the_tile_without_bank_conflicts",
    }
)


def by_name(name: str) -> Variant:
    return next(v for v in VARIANTS if v.name == name)


VARIANTS = (
    Variant("transpose_tiled for 2-D blocks", "transpose_tiled", TRANSPOSE_2D),
    Variant(
        "transpose_tiled, tile stored transposed", "transpose_tiled", TRANSPOSE_STORED_TRANSPOSED
    ),
    Variant("matmul_tiled, padded tiles, 2-D blocks", "matmul_tiled", MATMUL_PADDED_2D),
    Variant(
        "matmul_tiled, a in shared memory, b's column in a register",
        "matmul_tiled",
        MATMUL_B_IN_REGISTERS,
    ),
    Variant("strided_copy, grid-stride loop", "strided_copy", STRIDED_GRID_STRIDE),
    Variant("warp_sum, an xor butterfly with divmod", "warp_sum", WARP_SUM_XOR_BUTTERFLY),
    Variant(
        "warp_sum, laneid, activemask and a syncwarp",
        "warp_sum",
        WARP_SUM_SYNCWARP_SHARED_FREE,
    ),
    Variant(
        "matmul_tiled, the reference's body with parameters (A, B, C)",
        "matmul_tiled",
        "",
        rename=(("a", "A"), ("b", "B"), ("c", "C")),
    ),
    Variant(
        "transpose_tiled, the reference's body with parameters (inp, out)",
        "transpose_tiled",
        "",
        rename=(("src", "inp"), ("dst", "out")),
    ),
    Variant(
        "strided_copy(source, target, stride), the reference's body",
        "strided_copy",
        "",
        rename=(("src", "source"), ("dst", "target")),
    ),
    Variant(
        "fake: tile declared, touched once, bypassed",
        "transpose_tiled",
        FAKE_TILE_BYPASSED,
        TILED_TESTS,
    ),
    Variant(
        "fake: tile staged, dst written column by column",
        "transpose_tiled",
        FAKE_STRIDED_WRITES,
        frozenset({"test_transpose_tiled_coalesces_both_ways"}),
    ),
    Variant(
        "fake: tiles only in the first column of blocks",
        "transpose_tiled",
        FAKE_SOME_BLOCKS,
        frozenset(
            {
                "test_transpose_tiled_coalesces_both_ways",
                "test_transpose_tiled_moves_each_element_once",
            }
        ),
    ),
    Variant(
        "fake: unpadded tile read by column",
        "transpose_tiled",
        FAKE_UNPADDED,
        frozenset({"test_transpose_tiled_reads_the_tile_without_bank_conflicts"}),
    ),
    Variant(
        "fake: matmul_tiled that is the naive kernel (no shared memory)",
        "matmul_tiled",
        FAKE_MATMUL_NAIVE,
        frozenset({"test_matmul_tiled_reuses_each_load"}),
    ),
    Variant(
        "fake: matmul tiles filled, then bypassed",
        "matmul_tiled",
        FAKE_MATMUL_BYPASSED,
        frozenset({"test_matmul_tiled_reuses_each_load"}),
    ),
    Variant(
        "fake: warp_sum through shared memory and a barrier",
        "warp_sum",
        FAKE_WARP_SUM_SHARED,
        WARP_SUM_TESTS,
    ),
    Variant(
        "fake: warp_sum by lane 0 alone, in a loop",
        "warp_sum",
        FAKE_WARP_SUM_LANE0_LOOP,
        WARP_SUM_TESTS,
    ),
    Variant(
        "fake: whole tiles tiled, partial edge tiles copied naively",
        "transpose_tiled",
        FAKE_NAIVE_EDGE_TILES,
        frozenset(
            {
                "test_transpose_tiled_coalesces_both_ways",
                "test_transpose_tiled_moves_each_element_once",
            }
        ),
    ),
    Variant(
        "fake: tile stored transposed into an unpadded TILE x TILE array",
        "transpose_tiled",
        FAKE_STORE_CONFLICTS,
        frozenset({"test_transpose_tiled_reads_the_tile_without_bank_conflicts"}),
    ),
    Variant(
        "fake: tiled matmul accumulating into global c",
        "matmul_tiled",
        FAKE_MATMUL_SUMS_IN_C,
        frozenset({"test_matmul_tiled_reuses_each_load"}),
    ),
    Variant(
        "fake: tiled matmul adding into c with atomics",
        "matmul_tiled",
        FAKE_MATMUL_ATOMICS_ON_C,
        frozenset({"test_matmul_tiled_reuses_each_load"}),
    ),
)


def with_variants(variants: tuple[Variant, ...], text: str) -> str:
    """`text` with each variant's kernel replaced (one variant per kernel)."""
    assert len({v.kernel for v in variants}) == len(variants), "one variant per kernel"
    for v in variants:
        text = with_variant(v, text)
    return text


def with_variant(v: Variant, text: str) -> str:
    """`text` (the gpu_fundamentals reference) with `v.kernel`'s solution region replaced by
    `v.body`."""
    start = text.index(f"def {v.kernel}(")
    begin = text.index("    ### BEGIN SOLUTION\n", start) + len("    ### BEGIN SOLUTION\n")
    end = text.index("    ### END SOLUTION", begin)
    body = v.body or text[begin:end]
    if v.prelude:  # before the kernel's decorator, in its cell
        at = text.rindex("@cuda.jit\n", 0, start)
        text = text[:at] + v.prelude + "\n\n" + text[at:]
        shift = len(v.prelude) + 2
        start, begin, end = start + shift, begin + shift, end + shift
    if not v.rename:
        return text[:begin] + body + text[end:]
    names = dict(v.rename)
    line_end = text.index("\n", start)
    signature = re.sub(r"\b\w+\b", lambda m: names.get(m[0], m[0]), text[start:line_end])
    signature = signature.replace(f"def {names.get(v.kernel, v.kernel)}(", f"def {v.kernel}(")
    return text[:start] + signature + text[line_end:begin] + _renamed(body, names) + text[end:]


def _renamed(code: str, names: dict[str, str]) -> str:
    """`code` with every NAME token in `names` renamed (not an attribute: `cuda.threadIdx.x`
    keeps its `x`; comments and strings left alone)."""
    out: list[tokenize.TokenInfo] = []
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        after_dot = bool(out) and out[-1].string == "."
        rename = tok.type == tokenize.NAME and not after_dot
        out.append(tok._replace(string=names.get(tok.string, tok.string) if rename else tok.string))
    return tokenize.untokenize(out)
