"""Public tests for S5.3 Serving at scale (M10).

These are the checks you can run yourself: `grader check m10_serving` from the root of your
repository (the folder holding course.toml). The sizes and values of the kernel tests are drawn
(the `rng` fixture): the same on your machine and in the grading of your pull request. The
grader also runs hidden tests with inputs it draws for you at grading time, so make every function
correct in general, not only here.

Without a GPU your kernels run in Numba's CUDA simulator, so the kernel tests use small sizes.

PYTEST_DONT_REWRITE: the assert messages are the student's feedback, so pytest's own
introspection is not appended to them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from grader.suites.testing import expect_value_error, launch

TPB = 128  # the notebook's threads per block


@pytest.mark.points(1)
def test_sectors_per_request_examples(student):
    for run, itemsize, want in ((4096, 4, 4), (4, 4, 8), (1, 4, 32), (8, 2, 4), (16, 8, 8)):
        got = student.sectors_per_request(run, itemsize)
        assert type(got) is int and got == want, (
            f"sectors_per_request({run}, {itemsize}) returned {got!r}; expected {want}"
        )
    expect_value_error(
        lambda: student.sectors_per_request(6), "sectors_per_request(6)", "run: a power of two"
    )


@pytest.mark.points(2)
def test_scores_small(student, rng):
    batch, heads, dim = 2, 2, 4
    seq = int(rng.integers(TPB // dim + 1, 2 * TPB // dim))  # two blocks along the slab
    q = rng.standard_normal((batch, heads, dim)).astype(np.float32)
    k = rng.standard_normal((batch, heads, seq, dim)).astype(np.float32)
    want = np.einsum("bhd,bhsd->bhs", q.astype(np.float64), k)
    grid = (-(-seq * dim // TPB), batch * heads)
    for name, stored in (
        ("scores_bhsd", k),
        ("scores_bshd", np.ascontiguousarray(k.swapaxes(1, 2))),
    ):
        scores = np.zeros((batch, heads, seq), np.float32)
        launch(getattr(student, name), grid, TPB, q, stored, scores, n=seq, name=name)
        assert np.allclose(scores, want, rtol=1e-4, atol=1e-4), (
            f"{name}[{grid}, {TPB}] with seq {seq}, head_dim {dim}: wrong scores (first row "
            f"{scores[0, 0, :4]}, expected {want[0, 0, :4]})"
        )


@pytest.mark.points(1)
def test_scores_paged_small(student, rng):
    batch, heads, dim, page_size, seq = 2, 2, 4, 4, 37
    per_seq = -(-seq // page_size)
    q = rng.standard_normal((batch, heads, dim)).astype(np.float32)
    pool = rng.standard_normal((batch * per_seq + 2, heads, page_size, dim)).astype(np.float32)
    table = rng.permutation(pool.shape[0])[: batch * per_seq].reshape(batch, per_seq)
    table = table.astype(np.int32)
    want = np.zeros((batch, heads, seq))
    for b in range(batch):
        for s in range(seq):
            want[b, :, s] = (q[b] * pool[table[b, s // page_size], :, s % page_size]).sum(-1)
    scores = np.zeros((batch, heads, seq), np.float32)
    grid = (-(-seq * dim // TPB), batch * heads)
    launch(student.scores_paged, grid, TPB, q, pool, table, scores, n=seq, name="scores_paged")
    assert np.allclose(scores, want, rtol=1e-4, atol=1e-4), (
        "scores_paged: wrong scores; position s of sequence b is at "
        "k_pages[block_table[b, s // page_size], h, s % page_size, d]"
    )


@pytest.mark.points(1)
def test_kv_memory_examples(student):
    assert student.kv_blocks(33, 16) == 3, "33 tokens take 3 blocks of 16"
    assert student.admit(3, 17, 15, 16) is True, "17 + 15 = 32 tokens: 2 blocks (round once)"
    assert student.admit(3, 30, 19, 16) is False, "49 tokens need a 4th block"
    got = student.prefix_cache_savings(1000, 10, 16, 2e9)
    assert got == (558, 558 * 16 * 2e9), f"prefix_cache_savings(1000, 10, 16, 2e9) = {got!r}"
    assert student.preemption(2048, 524288, 16.0, 10_000)[0] == "swap"


@pytest.mark.points(1)
def test_tensor_parallel_examples(student):
    assert student.min_tp_degree(138e9, 0, 81559 * 2**20) == 2, "70B in fp16: two H100s"
    assert math.isclose(student.allreduce_s(1.0, 4, 900.0, 1e-6), 1.5 / 900e9 + 6e-6)
    assert student.allreduce_s(1e6, 1, 900.0, 1e-6) == 0.0
    assert student.allreduce_exposed_batch(2e9, 1, 10, 4096, 2, 1000.0, 900.0, 1e-6) is None


@pytest.mark.points(1)
def test_moe_and_speculation_examples(student):
    assert student.moe_params(1, 10, 8, 2) == (81, 21)
    assert math.isclose(student.experts_touched(8, 2, 8), 8 * (1 - 0.75**8))
    assert student.moe_crossover_batch(0, 1000, 1, 1, 2, 100.0) == 100
    assert math.isclose(student.expected_tokens(0.8, 4), 3.3616)
    assert student.best_draft_length(0.8, 0.1) == 6


@pytest.mark.points(1)
def test_requests_examples(student):
    assert math.isclose(student.decode_tpot(2.0, 100, 0.02, 0.0025), 0.04)
    assert student.p99([3, 1, 2]) == 3.0
    assert np.allclose(student.ttfts([0.0, 0.05, 1.0], 0.1), [0.1, 0.15, 0.1])
    engine = {"prefill_s": 0.05, "output_tokens": 100, "base_s": 0.02, "per_seq_s": 0.0025}
    assert student.goodput([1.0, 2.0, 3.0], engine, 10.0, 0.045, 200, 0) == 2.0
