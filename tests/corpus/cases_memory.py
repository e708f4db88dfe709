"""Corpus family "memory": the memory lessons graded from the memory model, in the sandbox.

The fakes compute the right answer and skip one lesson (a tile declared and bypassed, strided
writes that survive the tiling, tiling in only some blocks, an unpadded tile read by column,
matmul tiles filled and then ignored): each loses exactly that lesson's tests and nothing else.
A correct design in another style (a kernel written for 2-D blocks) keeps every point. And a
student's own 1,024-thread blocks with a barrier run in the sandbox under the course's process
limit (the simulator's threads are greenlets, not Python threads): as root here, and as an
ordinary user in the corpus's second pass.
"""

from __future__ import annotations

from build import BROKEN, Case, Ctx, Expect, Rule, write_fork
from memory_kernels import by_name, with_variant

GF = "gpu_fundamentals"
TILED_COALESCED = Rule(
    r"test_transpose_tiled_coalesces_both_ways", BROKEN, ("ideal sectors", "32.0 sectors")
)
TILED_ONCE = Rule(
    r"test_transpose_tiled_moves_each_element_once", BROKEN, ("shared memory", "barrier")
)
TILED_BANKS = Rule(
    r"test_transpose_tiled_reads_the_tile_without_bank_conflicts",
    BROKEN,
    ("bank conflicts", "reads nothing back"),
)


def _variant(name: str):
    def build(dest, ctx: Ctx) -> None:
        write_fork(dest, {GF: with_variant(by_name(name), ctx.solutions[GF])}, ctx=ctx)

    return build


BIG_BLOCKS_KERNEL = """\
    i = cuda.grid(1)
    if i < c.size:
        c[i] = a[i] + b[i]
    cuda.syncthreads()
"""


def _big_blocks(dest, ctx: Ctx) -> None:
    """vector_add with a (harmless) barrier, and gpu_vector_add launching 1,024-thread blocks
    whatever it is asked: the replay of its launches runs blocks of 1,024 threads that all wait
    at the barrier."""
    text = ctx.solutions[GF]
    start = text.index("def vector_add(")
    begin = text.index("    ### BEGIN SOLUTION\n", start) + len("    ### BEGIN SOLUTION\n")
    end = text.index("    ### END SOLUTION", begin)
    text = text[:begin] + BIG_BLOCKS_KERNEL + text[end:]
    old = "    blocks, threads = launch_config(a.size, threads_per_block)\n"
    assert text.count(old) == 1, "gpu_vector_add's launch_config line moved"
    text = text.replace(old, "    blocks, threads = launch_config(a.size, 1024)\n")
    write_fork(dest, {GF: text}, ctx=ctx)


CASES: list[Case] = [
    Case(
        "memory_fake_tile_bypassed",
        "transpose_tiled declares the padded tile, touches it once, syncs, then transposes "
        "straight from global memory: every tiling lesson lost, nothing else",
        _variant("fake: tile declared, touched once, bypassed"),
        Expect(GF, [TILED_COALESCED, TILED_ONCE, TILED_BANKS], max_s=60),
        slow=True,
    ),
    Case(
        "memory_fake_strided_writes",
        "transpose_tiled stages the tile but writes dst column by column: only coalescing lost",
        _variant("fake: tile staged, dst written column by column"),
        Expect(GF, [TILED_COALESCED], max_s=60),
        slow=True,
    ),
    Case(
        "memory_fake_some_blocks",
        "transpose_tiled tiles in the first column of blocks only, the naive copy elsewhere",
        _variant("fake: tiles only in the first column of blocks"),
        Expect(GF, [TILED_COALESCED, TILED_ONCE], max_s=60),
        slow=True,
    ),
    Case(
        "memory_fake_unpadded_tile",
        "transpose_tiled with an unpadded TILE x TILE tile read by column: 32-way bank "
        "conflicts, only that lesson lost",
        _variant("fake: unpadded tile read by column"),
        Expect(GF, [TILED_BANKS], max_s=60),
        slow=True,
    ),
    Case(
        "memory_fake_matmul_bypassed",
        "matmul_tiled fills both tiles, syncs, then multiplies straight from global memory",
        _variant("fake: matmul tiles filled, then bypassed"),
        Expect(
            GF,
            [Rule(r"test_matmul_tiled_reuses_each_load", BROKEN, ("accesses to global memory",))],
            max_s=60,
        ),
        slow=True,
    ),
    Case(
        "memory_correct_2d_blocks",
        "transpose_tiled written for 2-D blocks (rows strided by blockDim.y): full marks",
        _variant("transpose_tiled for 2-D blocks"),
        Expect(GF, [], max_s=60),
        slow=True,
    ),
    Case(
        "memory_block_of_1024_with_a_barrier",
        "gpu_vector_add launches 1,024-thread blocks of a vector_add that waits at a barrier: "
        "they run under the sandbox's process limit, full marks",
        _big_blocks,
        Expect(GF, [], max_s=60),
        slow=True,
    ),
]
