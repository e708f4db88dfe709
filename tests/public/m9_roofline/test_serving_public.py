"""Public tests for M9's serving numbers: the tokens/s ceiling and whether the batch fits.

Run them with the rest of the public suite: `pytest tests/public/m9_roofline` from the root of
your repository. The grader's hidden tests draw their own configs, GPUs and batches.

PYTEST_DONT_REWRITE: the assert messages are the student's feedback, so pytest's own
introspection is not appended to them.
"""

from __future__ import annotations

import pytest

COURSE_PARAMS = 1_311_872
T4_LIKE = {"name": "T4", "peak_flops": 65e12, "peak_bandwidth": 320e9, "memory_bytes": 16e9}


@pytest.mark.points(1)
def test_tokens_per_s_bound_course_model(student, course_model):
    got = student.decode_tokens_per_s_bound(course_model, T4_LIKE, 1, 0)
    want = 320e9 / (2 * COURSE_PARAMS)
    assert type(got) is float and got == pytest.approx(want, rel=1e-9), (
        f"decode_tokens_per_s_bound(course model, T4, batch=1, context_len=0) returned {got!r}; "
        f"expected {want:.6g} tokens/s: 320e9 byte/s over 2 bytes x {COURSE_PARAMS:,} weights"
    )
    compute = student.decode_tokens_per_s_bound(course_model, T4_LIKE, 1000, 0)
    assert compute == pytest.approx(65e12 / (2 * COURSE_PARAMS), rel=1e-9), (
        f"decode_tokens_per_s_bound(course model, T4, batch=1000, context_len=0) returned "
        f"{compute!r}; past the ridge the compute roof binds: peak_flops / (2 * matmul params) = "
        f"{65e12 / (2 * COURSE_PARAMS):.6g} tokens/s"
    )
    got8 = student.decode_tokens_per_s_bound(course_model, T4_LIKE, 8, 512)
    want8 = 8 * 320e9 / (2 * COURSE_PARAMS + 8 * 512 * 1024)
    assert got8 == pytest.approx(want8, rel=1e-9), (
        f"decode_tokens_per_s_bound(course model, T4, batch=8, context_len=512) returned "
        f"{got8!r}; expected {want8:.6g} tokens/s for the whole batch"
    )


@pytest.mark.points(1)
def test_kv_cache_fits_examples(student, course_model):
    need = 2 * COURSE_PARAMS + 4 * 512 * 1024  # batch 4 at 512 tokens
    for memory, want in ((need, True), (need - 1, False), (16e9, True)):
        got = student.kv_cache_fits(
            course_model, {**T4_LIKE, "memory_bytes": float(memory)}, 4, 512
        )
        assert got is want, (
            f"kv_cache_fits(course model, memory_bytes={memory:.12g}, batch=4, 512) returned "
            f"{got!r}; the batch needs {need:,} bytes, so the answer is {want}"
        )


@pytest.mark.points(1)
def test_max_batch_that_fits_examples(student, course_model):
    per_seq = 512 * 1024  # 512 tokens x 1,024 bytes of fp16 K and V
    gpu = {**T4_LIKE, "memory_bytes": float(2 * COURSE_PARAMS + 3 * per_seq)}
    got = student.max_batch_that_fits(course_model, gpu, 512)
    assert type(got) is int and got == 3, (
        f"max_batch_that_fits(course model, memory for the weights + 3 caches, 512) returned "
        f"{got!r}; expected the int 3 (exactly full still fits)"
    )
    small = {**T4_LIKE, "memory_bytes": float(2 * COURSE_PARAMS - 1)}
    got0 = student.max_batch_that_fits(course_model, small, 512)
    assert got0 == 0, f"when the weights alone do not fit the answer is 0, got {got0!r}"
    half = student.max_batch_that_fits(course_model, gpu, 512, weight_bytes=2, kv_bytes=1)
    assert half == 6, (
        f"with an 8-bit cache (kv_bytes=1) twice as many sequences fit: expected 6, got {half!r}"
    )


@pytest.mark.points(1)
def test_decode_step_breakdown_course_model(student, course_model):
    step = student.decode_step_breakdown(course_model, 1, 512, T4_LIKE)
    assert isinstance(step, dict) and set(step) == {"weights", "attention", "time_s"}, (
        f"decode_step_breakdown must return the keys weights, attention, time_s, got {step!r}"
    )
    weights, attention = step["weights"], step["attention"]
    assert weights["flops"] == 2 * COURSE_PARAMS and weights["bytes"] == 2 * COURSE_PARAMS, (
        f"weights: FLOPs 2 * P and bytes P * 2 at batch 1 in fp16, got {weights!r}"
    )
    assert attention["flops"] == 4 * 4 * 128 * 512 and attention["bytes"] == 512 * 1024, (
        f"attention: FLOPs 4 * n_layers * dim * context, bytes context * 1,024, got {attention!r}"
    )
    assert weights["bound"] == "memory" and attention["intensity"] == 2.0, (
        f"batch 1 is memory-bound; attention's intensity is n_heads / n_kv_heads = 2: {step!r}"
    )
    want = (2 * COURSE_PARAMS + 512 * 1024) / 320e9
    assert step["time_s"] == pytest.approx(want, rel=1e-9), (
        f"time_s is {step['time_s']!r}; both kernels are memory-bound, so the sum is "
        f"(weights + cache bytes) / bandwidth = {want:.6g} s"
    )


@pytest.mark.points(1)
def test_prefill_and_ttft_course_model(student, course_model):
    one = student.prefill_time(course_model, 1, 1, T4_LIKE)
    want = (2 * COURSE_PARAMS + 1024) / 320e9  # weights read, one token's cache written
    assert type(one) is float and one == pytest.approx(want, rel=1e-9), (
        f"prefill_time(course model, batch=1, prompt_len=1, T4) returned {one!r}; expected "
        f"{want:.6g} s: memory-bound, the weights read plus the KV cache written"
    )
    ttft, tpot = student.ttft_and_tpot(course_model, 1, 512, T4_LIKE)
    step = student.decode_step_breakdown(course_model, 1, 512, T4_LIKE)["time_s"]
    assert tpot == pytest.approx(step, rel=1e-12) and ttft > tpot, (
        f"ttft_and_tpot(course model, 1, 512, T4) returned {(ttft, tpot)!r}: TPOT is one decode "
        f"step at context 512 ({step!r} s), and TTFT, the prefill, is longer"
    )
