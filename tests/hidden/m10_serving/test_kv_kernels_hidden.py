"""Hidden tests for M10 §1: decode attention's scores over two KV layouts and over pages.

The kernels are launched in the simulator on drawn shapes (the student's seed) and compared with
the exact dot products; then profiled once each (`student.kernel[grid, block].profile(...)`,
`grader.simt.memmodel`), and every warp request that reads the key cache must move the sectors
the notebook's rule gives for that layout. The key cache is found in the profile by its place
in the call (the second argument: its element count, which no other argument shares), never by
the name the student gave the parameter.

Stated rules (grader verify checks that every test here is listed, with a sentence that appears
word for word in the released notebook):

- test_sectors_per_request_random: "a warp reading 32 consecutive elements of a slab stored in
  contiguous runs of `run` elements (a power of two, each run starting at a multiple of its own
  size, runs of different positions at least 32 bytes apart) spans `max(1, 32 // run)` runs, and
  each run's part of the request covers `ceil(min(run, 32) * itemsize / 32)` sectors."
- test_sectors_per_request_invalid: "`run` and `itemsize` are powers of two (`run` at least 1,
  `itemsize` from 1 to 16): `ValueError` for another integer."
- test_scores_layouts_random: "The grader launches each on the grid the mapping names, with
  `TPB` threads per block, on shapes whose `seq * head_dim` is not always a multiple of `TPB`,
  and compares every score with the exact dot product, allowing `1e-4` times the sum of the
  absolute values of its products."
- test_scores_paged_random: "The grader checks its scores as above, with block tables that
  scatter each sequence's pages over the pool"
- test_scores_compile_to_ptx: "The PTX compile for the T4 uses the signature"
- test_bhsd_reads_coalesce: "every request that reads `k` must move exactly
  `sectors_per_request(run)` sectors, with `run = 32` for `scores_bhsd`"
- test_bshd_reads_cost_the_rule: "`run = head_dim` for `scores_bshd`, with `head_dim` a power
  of two; the head counts it draws keep the rows of different positions at least 32 bytes
  apart."
- test_paged_reads_cost_the_rule: "every request that reads `k_pages` must move exactly
  `sectors_per_request(page_size * head_dim)` sectors"

PYTEST_DONT_REWRITE: pytest leaves these asserts alone, because their messages are what the
student reads as feedback.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.simt.memmodel import GLOBAL, LOAD
from grader.suites.student import StudentError
from grader.suites.testing import expect_raises, launch

TPB = 128  # the notebook's threads per block
SIGNATURES = {
    "scores_bhsd": "void(float32[:, :, :], float32[:, :, :, :], float32[:, :, :])",
    "scores_bshd": "void(float32[:, :, :], float32[:, :, :, :], float32[:, :, :])",
    "scores_paged": "void(float32[:, :, :], float32[:, :, :, :], int32[:, :], float32[:, :, :])",
}


def grid(seq: int, dim: int, batch: int, heads: int) -> tuple[int, int]:
    return (-(-seq * dim // TPB), batch * heads)


def cache(rng, batch, heads, seq, dim):
    q = rng.standard_normal((batch, heads, dim)).astype(np.float32)
    k = rng.standard_normal((batch, heads, seq, dim)).astype(np.float32)
    return q, k


def check_scores(name, scores, products):
    """products: (batch, heads, seq, dim) float64, the terms each score adds up."""
    want = products.sum(axis=-1)
    bound = 1e-4 * np.abs(products).sum(axis=-1) + 1e-6
    bad = np.argwhere(~(np.abs(scores - want) <= bound))
    assert bad.size == 0, (  # grader: public
        f"{name}: scores{tuple(int(i) for i in bad[0])} = {scores[tuple(bad[0])]}, expected "
        f"{want[tuple(bad[0])]:.6g} ({len(bad)} of {want.size} scores wrong; shapes batch, "
        f"heads, seq, head_dim = {products.shape}). Each thread adds one q[b, h, d] * K term "
        "into scores[b, h, s] with cuda.atomic.add; scores arrives zeroed"
    )


def paged(rng, batch, heads, seq, dim, page_size, spare):
    """A pool with `spare` unused pages and a block table that scatters each sequence's."""
    per_seq = -(-seq // page_size)
    pages = batch * per_seq + spare
    q = rng.standard_normal((batch, heads, dim)).astype(np.float32)
    pool = rng.standard_normal((pages, heads, page_size, dim)).astype(np.float32)
    table = rng.permutation(pages)[: batch * per_seq].reshape(batch, per_seq).astype(np.int32)
    gathered = np.stack(
        [
            np.stack([pool[table[b, s // page_size], :, s % page_size] for s in range(seq)], 1)
            for b in range(batch)
        ]
    )  # (batch, heads, seq, dim)
    return q, pool, table, gathered


@pytest.mark.points(2)
def test_sectors_per_request_random(student, reference, rng):
    cases = [(1, 4), (2, 4), (4, 4), (8, 4), (32, 4), (4096, 4), (8, 2), (2, 8), (64, 16)]
    cases += [(int(2 ** rng.integers(0, 12)), int(2 ** rng.integers(0, 5))) for _ in range(12)]
    outcomes = student.sectors_per_request.many([((r, i), {}) for r, i in cases])
    for (run, itemsize), outcome in zip(cases, outcomes, strict=True):
        got, want = outcome.get(), reference.sectors_per_request(run, itemsize)
        assert type(got) is int and got == want, (
            f"sectors_per_request({run}, {itemsize}) returned {got!r}; expected {want}: "
            f"max(1, 32 // run) runs of ceil(min(run, 32) * itemsize / 32) sectors each, an int"
        )


INVALID = [
    ("run=6", lambda s: s.sectors_per_request(6), ValueError, "run must be a power of two"),
    ("run=0", lambda s: s.sectors_per_request(0), ValueError, "run is at least 1"),
    ("itemsize=3", lambda s: s.sectors_per_request(4, 3), ValueError, "itemsize: 1, 2, 4, 8, 16"),
    ("itemsize=32", lambda s: s.sectors_per_request(4, 32), ValueError, "itemsize at most 16"),
    ("run=4.0", lambda s: s.sectors_per_request(4.0), TypeError, "run must be an integer"),
    ("run=True", lambda s: s.sectors_per_request(True), TypeError, "a bool is not a count"),
]


@pytest.mark.points(1)
@pytest.mark.parametrize("what,call,error,hint", INVALID, ids=[case[0] for case in INVALID])
def test_sectors_per_request_invalid(student, what, call, error, hint):
    expect_raises(lambda: call(student), error, f"sectors_per_request: {what}", hint)


@pytest.mark.points(4)
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_scores_layouts_random(student, rng, layout):
    for dim in (int(rng.choice([3, 4, 8])), int(rng.choice([5, 16]))):
        batch, heads = int(rng.integers(1, 3)), int(rng.integers(2, 4))  # layouts differ
        seq = int(rng.integers(TPB // dim + 1, 2 * TPB // dim + 2))  # more than one block
        q, k = cache(rng, batch, heads, seq, dim)
        stored = k if layout == "bhsd" else np.ascontiguousarray(k.swapaxes(1, 2))
        scores = np.zeros((batch, heads, seq), np.float32)
        name = f"scores_{layout}"
        kernel = getattr(student, name)
        launch(kernel, grid(seq, dim, batch, heads), TPB, q, stored, scores, n=seq, name=name)
        products = q.astype(np.float64)[:, :, None, :] * k
        check_scores(f"{name}[{grid(seq, dim, batch, heads)}, {TPB}]", scores, products)


@pytest.mark.points(3)
def test_scores_paged_random(student, rng):
    for page_size, dim in ((int(rng.choice([1, 3, 4])), 4), (int(rng.choice([8, 16])), 8)):
        batch, heads = 2, int(rng.integers(1, 3))
        seq = int(rng.integers(TPB // dim + 1, 2 * TPB // dim))
        q, pool, table, gathered = paged(rng, batch, heads, seq, dim, page_size, 3)
        scores = np.zeros((batch, heads, seq), np.float32)
        g = grid(seq, dim, batch, heads)
        launch(student.scores_paged, g, TPB, q, pool, table, scores, n=seq, name="scores_paged")
        products = q.astype(np.float64)[:, :, None, :] * gathered
        check_scores(f"scores_paged[{g}, {TPB}] with page_size {page_size}", scores, products)


@pytest.mark.points(1)
@pytest.mark.parametrize("name", list(SIGNATURES))
def test_scores_compile_to_ptx(student, name):
    try:
        ptx = getattr(student, name).ptx(SIGNATURES[name])
    except StudentError as exc:
        pytest.fail(
            f"{name} does not compile for the course GPU ({SIGNATURES[name]}): "
            f"{exc.feedback()[-800:]}"
        )
    assert isinstance(ptx, str) and ".entry" in ptx, (
        f"compiling {name} for the course GPU did not produce a kernel entry point"
    )


def cache_reads(profiled, array):
    """The load sites of the argument `array` (found by its element count, its place in the
    call), with a message if there are none."""
    found = [
        a.name
        for a in profiled.memory.arrays
        if a.space == GLOBAL and a.elements == array.size and a.itemsize == array.itemsize
    ]
    assert len(found) == 1, f"the profile has {len(found)} arrays of the key cache's size"
    return profiled.memory.where(GLOBAL, LOAD, found[0])


def shown(sites) -> str:
    return (
        "; ".join(
            f"{s.where}: {s.requests} requests, {s.min_sectors} to {s.max_sectors} sectors each"
            for s in sites
        )
        or "no reads of the key cache"
    )


def require_sectors(name, sites, want, why):
    assert sites and all(s.min_sectors == s.max_sectors == want for s in sites), (
        f"{name}: every warp request reading the key cache should move {want} sectors "
        f"({why}); the grader counted {shown(sites)}. Follow §1's mapping: the lanes of a warp "
        "take consecutive elements e of the head's (seq, head_dim) slab, s = e // head_dim, "
        "d = e % head_dim, and each thread reads its key once"
    )


def profiled_layout(student, layout, q, k, stored):
    batch, heads, seq, dim = k.shape
    scores = np.zeros((batch, heads, seq), np.float32)
    name = f"scores_{layout}"
    g = grid(seq, dim, batch, heads)
    profiled = getattr(student, name)[g, TPB].profile(q, stored, scores)
    check_scores(f"{name}[{g}, {TPB}]", scores, q.astype(np.float64)[:, :, None, :] * k)
    return profiled


@pytest.mark.points(2)
def test_bhsd_reads_coalesce(student, reference, rng):
    dim = int(rng.choice([2, 4, 8]))
    seq = 32 * int(rng.integers(1, 3))  # whole warps of positions, and of slab elements
    q, k = cache(rng, 1, 2, seq, dim)
    profiled = profiled_layout(student, "bhsd", q, k, k)
    sites = cache_reads(profiled, k)
    want = reference.sectors_per_request(32)
    require_sectors("scores_bhsd", sites, want, "a head's slab is contiguous: 4, the ideal")
    assert all(s.sectors == s.ideal_sectors for s in sites), (
        f"scores_bhsd's reads of the key cache should be ideal; the grader counted {shown(sites)}"
    )


@pytest.mark.points(2)
def test_bshd_reads_cost_the_rule(student, reference, rng):
    dim = int(rng.choice([2, 4]))  # rows of 8 or 16 bytes: 4x or 2x the ideal
    heads = 8 // dim  # rows of one head 32 bytes apart
    seq = 32 * int(rng.integers(1, 3))  # whole warps of positions, and of slab elements
    q, k = cache(rng, 1, heads, seq, dim)
    stored = np.ascontiguousarray(k.swapaxes(1, 2))
    profiled = profiled_layout(student, "bshd", q, k, stored)
    want = reference.sectors_per_request(dim)
    require_sectors(
        "scores_bshd",
        cache_reads(profiled, stored),
        want,
        f"rows of {dim} float32 keys: sectors_per_request({dim})",
    )


@pytest.mark.points(2)
def test_paged_reads_cost_the_rule(student, reference, rng):
    for page_size, dim in ((int(rng.choice([1, 2])), 2), (int(rng.choice([8, 16])), 4)):
        heads = max(1, 8 // (page_size * dim))  # a head's pages at least 32 bytes apart
        seq = 32
        q, pool, table, gathered = paged(rng, 1, heads, seq, dim, page_size, 1)
        scores = np.zeros((1, heads, seq), np.float32)
        g = grid(seq, dim, 1, heads)
        profiled = student.scores_paged[g, TPB].profile(q, pool, table, scores)
        check_scores(
            f"scores_paged[{g}, {TPB}]", scores, q.astype(np.float64)[:, :, None, :] * gathered
        )
        want = reference.sectors_per_request(page_size * dim)
        require_sectors(
            f"scores_paged with pages of {page_size} positions, head_dim {dim}",
            cache_reads(profiled, pool),
            want,
            f"runs of page_size * head_dim = {page_size * dim}: sectors_per_request",
        )
