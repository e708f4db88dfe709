"""Hidden tests for S5.1's warp shuffle exercise, `warp_sum` (never shipped to students).

Sizes and block sizes are drawn at grading time: a partial last warp, fewer elements than one
warp, whole warps, and whole warps past the end of `x`; the values are drawn too, and a fixed
example (each warp's elements distinct powers of two) tells which lanes a wrong sum missed. The
kernel is compiled for the course GPU, and profiled in the simulator with its memory accesses
recorded, to see that the lanes trade their values by shuffles and not through memory.

Stated rules (grader verify checks that every test here is listed, with a sentence that appears
word for word in the released notebook):

- test_warp_sum_sizes: "It is launched with blocks whose size is a multiple of 32 and enough
  blocks for `n` threads, so the last warp may be **partial**: its lanes with `i >= n` add `0`
  but still take part in every shuffle"
- test_warp_sum_compiles_to_ptx: "The grader compiles it for the T4 with the signature
  `void(float32[:], float32[:])`"
- test_warp_sum_keeps_to_registers: "`x` is read once, in one request per warp (one element per
  lane), `out` written once per warp, and nothing goes through shared memory or atomics."

PYTEST_DONT_REWRITE: pytest leaves these asserts alone, because their messages are what the
student reads as feedback.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.simt.memmodel import GLOBAL, LOAD, SHARED
from grader.suites.student import StudentError
from grader.suites.testing import expect_written, first_mismatch, launch, unwritten

WARP = 32
RTOL = 1e-5  # of the sum of the absolute values of a warp's elements


def _check(student, x: np.ndarray, tpb: int, blocks: int | None = None) -> None:
    n = x.size
    warps = -(-n // WARP)
    blocks = blocks or -(-n // tpb)
    out = unwritten(warps)
    launch(student.warp_sum, blocks, tpb, x, out, n=n, name="warp_sum")
    expect_written(out, "warp_sum", "out")
    padded = np.zeros(warps * WARP, np.float64)
    padded[:n] = x
    want = padded.reshape(warps, WARP).sum(axis=1)
    scale = np.abs(padded).reshape(warps, WARP).sum(axis=1)
    ok = np.abs(out - want) <= RTOL * scale + 1e-30
    assert ok.all(), (
        f"warp_sum[{blocks}, {tpb}] on {n} float32 elements ({warps} warps, the last with "
        f"{n - (warps - 1) * WARP} elements): {first_mismatch(out, want, ok)} "
        f"(warp {int(np.flatnonzero(~ok)[0])}). Each warp sums its 32 elements with "
        "cuda.shfl_down_sync(0xFFFFFFFF, value, delta) for delta = 16, 8, 4, 2, 1, lanes past "
        "the end adding 0, and lane 0 writes out[i // 32]"
    )


@pytest.mark.points(2)
def test_warp_sum_sizes(student, rng):
    # each warp's elements are distinct powers of two (exact in float32): a missed lane shows
    powers = np.exp2(np.arange(WARP) % 24).astype(np.float32)
    _check(student, np.tile(powers, 3)[:70], 64)
    for tpb, low, high in ((32, 1, 32), (64, 33, 300), (128, 200, 700), (256, 257, 1200)):
        n = int(rng.integers(low, high))
        x = (rng.standard_normal(n) * 10).astype(np.float32)
        _check(student, x, tpb)
    # whole warps past the end of x (a grid larger than needed) write nothing
    x = rng.standard_normal(96).astype(np.float32)
    _check(student, x, 64, blocks=4)


@pytest.mark.points(1)
def test_warp_sum_compiles_to_ptx(student, rng):
    _check(student, rng.standard_normal(int(rng.integers(33, 64))).astype(np.float32), 32)
    signature = "void(float32[:], float32[:])"
    try:
        ptx = student.warp_sum.ptx(signature)
    except StudentError as exc:
        pytest.fail(
            f"warp_sum runs in the simulator but does not compile for the course GPU "
            f"({signature}): {exc.feedback()[-800:]}"
        )
    assert isinstance(ptx, str) and ".entry" in ptx, (
        "compiling warp_sum for the course GPU did not produce a kernel entry point"
    )


@pytest.mark.points(1)
def test_warp_sum_keeps_to_registers(student, rng):
    n, tpb = 1000, 256
    warps = -(-n // WARP)
    x = rng.standard_normal(n).astype(np.float32)
    out = unwritten(warps)
    profiled = student.warp_sum[-(-n // tpb), tpb].profile(x, out)
    want = np.add.reduceat(x.astype(np.float64), np.arange(0, n, WARP))
    assert np.allclose(out, want, rtol=RTOL, atol=1e-4), (
        f"warp_sum[{-(-n // tpb)}, {tpb}] on {n} elements did not compute the warps' sums, so "
        "its memory profile earns nothing; see the correctness tests' feedback"
    )
    memory = profiled.memory
    xs, outs = memory.array(profiled.arg(0)), memory.array(profiled.arg(1))
    reads = memory.where(GLOBAL, LOAD, profiled.arg(0))
    requests = sum(s.requests for s in reads)
    assert xs is not None and xs.loads == xs.distinct_loaded == n and requests == warps, (
        f"warp_sum read x {getattr(xs, 'loads', 0)} times in {requests} requests for its {n} "
        f"elements ({warps} warps): each lane reads its own element once, so each warp reads "
        "its 32 elements in one request; the sum then moves between lanes by shuffles"
    )
    assert outs is not None and outs.stores == outs.distinct_stored == warps, (
        f"warp_sum wrote out {getattr(outs, 'stores', 0)} times for its {warps} warps: lane 0 "
        "of each warp writes its warp's sum once"
    )
    shared = memory.where(SHARED)
    atomics = sum(t.atomics for t in memory.arrays)
    assert not shared and not atomics, (
        f"warp_sum used shared memory ({len(shared)} sites) or atomics ({atomics}): the lanes "
        "of a warp pass their values with cuda.shfl_down_sync, register to register"
    )
