"""Public tests for M9's serving numbers: the tokens/s ceiling, whether the batch fits, the
decode step's kernels, prefill, and the serving-engine sections (MBU, continuous batching,
chunked prefill, decode attention).

Run them with the rest of the public suite: `pytest tests/public/m9_roofline` from the root of
your repository. The grader's hidden tests draw their own configs, GPUs and batches.

PYTEST_DONT_REWRITE: the assert messages are the student's feedback, so pytest's own
introspection is not appended to them.
"""

from __future__ import annotations

import pytest

COURSE_PARAMS = 1_311_872
RUNTIME = 3 * 2**30  # the notebook's RUNTIME_BYTES: runtime_bytes when it is not given
T4_LIKE = {
    "name": "T4",
    "peak_flops": 65e12,
    "peak_bandwidth": 320e9,
    "memory_bytes": 15360 * 2**20,  # nvidia-smi's 15,360 MiB
    "usable_memory_fraction": 0.9,
    "sm_count": 40,
}
H100_LIKE = {
    **T4_LIKE,
    "name": "H100",
    "peak_flops": 989e12,
    "peak_bandwidth": 3350e9,
    "memory_bytes": 81559 * 2**20,
    "sm_count": 132,
}
LLAMA3_8B = {
    "name": "llama-3-8b",
    "dim": 4096,
    "n_layers": 32,
    "n_heads": 32,
    "n_kv_heads": 8,
    "vocab_size": 128256,
    "ffn_hidden_dim": 14336,
    "tied_embeddings": False,
}


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
    need = 2 * COURSE_PARAMS + RUNTIME + 4 * 512 * 1024  # batch 4 at 512 tokens, the runtime
    for memory, fraction, runtime, want in (
        (need, 1.0, None, True),
        (need - 1, 1.0, None, False),  # the runtime comes out of the budget too
        (need, 0.9, None, False),  # the budget is 90% of the card, not all of it
        (T4_LIKE["memory_bytes"], 0.9, None, True),
        (need - RUNTIME, 1.0, 0, True),  # runtime_bytes as given
        (need - RUNTIME, 1.0, 1, False),
    ):
        gpu = {**T4_LIKE, "memory_bytes": memory, "usable_memory_fraction": fraction}
        more = {} if runtime is None else {"runtime_bytes": runtime}
        got = student.kv_cache_fits(course_model, gpu, 4, 512, **more)
        used = RUNTIME if runtime is None else runtime
        assert got is want, (
            f"kv_cache_fits(course model, memory_bytes={memory}, usable_memory_fraction="
            f"{fraction}, batch=4, 512, runtime_bytes={used}) returned {got!r}; the weights, the "
            f"runtime and the caches need {need - RUNTIME + used:,} bytes of the {fraction} x "
            f"{memory:,} budget, so the answer is {want}"
        )


@pytest.mark.points(1)
def test_max_batch_that_fits_examples(student, course_model):
    per_seq = 512 * 1024  # 512 tokens x 1,024 bytes of fp16 K and V
    gpu = {
        **T4_LIKE,
        "memory_bytes": 2 * COURSE_PARAMS + 3 * per_seq,
        "usable_memory_fraction": 1.0,
    }
    got = student.max_batch_that_fits(course_model, gpu, 512, runtime_bytes=0)
    assert type(got) is int and got == 3, (
        f"max_batch_that_fits(course model, memory for the weights + 3 caches, 512, "
        f"runtime_bytes=0) returned {got!r}; expected the int 3 (exactly full still fits)"
    )
    got0 = student.max_batch_that_fits(course_model, gpu, 512)
    assert got0 == 0, (
        f"max_batch_that_fits(course model, the same memory, 512) returned {got0!r}; expected 0: "
        "the default 3 GiB runtime does not fit beside the weights"
    )
    small = {**gpu, "memory_bytes": 2 * COURSE_PARAMS - 1}
    got0 = student.max_batch_that_fits(course_model, small, 512, runtime_bytes=0)
    assert got0 == 0, f"when the weights alone do not fit the answer is 0, got {got0!r}"
    half = student.max_batch_that_fits(
        course_model, gpu, 512, dtype_bytes=2, kv_dtype_bytes=1, runtime_bytes=0
    )
    assert half == 6, (
        f"with an 8-bit cache (kv_dtype_bytes=1) twice as many sequences fit: expected 6, got "
        f"{half!r}"
    )
    for runtime, want in ((None, 859), (0, 907)):
        more = {} if runtime is None else {"runtime_bytes": runtime}
        h100 = student.max_batch_that_fits(LLAMA3_8B, H100_LIKE, 512, **more)
        used = RUNTIME if runtime is None else runtime
        assert h100 == want, (
            f"max_batch_that_fits(Llama-3-8B, H100, 512, runtime_bytes={used}) returned {h100!r}; "
            f"expected {want}: 90% of 81,559 MiB (x 2**20 bytes) less 16.06 GB of fp16 weights "
            "and the runtime, over 512 x 128 KiB per sequence"
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


@pytest.mark.points(1)
def test_decode_utilization_llama_on_h100(student):
    # Llama-3-8B, batch 16, 2,048 tokens on the H100, memory-bound: the roofline time of the step
    kv_bytes = 16 * 2048 * 131_072
    roof = (2 * 7_504_924_672 + kv_bytes) / 3350e9
    got = student.decode_utilization(LLAMA3_8B, 16, 2048, H100_LIKE, 2 * roof)
    assert isinstance(got, dict) and set(got) == {"mbu", "mfu"}, (
        f"decode_utilization must return a dict with the keys mbu and mfu, got {got!r}"
    )
    assert got["mbu"] == pytest.approx(0.5, rel=1e-9) and got["mfu"] == pytest.approx(
        0.02258, rel=1e-3
    ), (
        f"decode_utilization(Llama-3-8B, 16, 2048, H100, tpot_s = twice the roofline time) "
        f"returned {got!r}; expected MBU 0.5 (half the roofline's bandwidth) and MFU about "
        "0.0226 (attention's FLOPs included: 4.5% at the roofline, halved)"
    )


@pytest.mark.points(1)
def test_continuous_batching_examples(student):
    mixed = student.ragged_decode_step(LLAMA3_8B, [100, 500, 2000, 8000], H100_LIKE)
    assert type(mixed) is float and mixed == pytest.approx(4.8953e-3, rel=1e-4), (
        f"ragged_decode_step(Llama-3-8B, [100, 500, 2000, 8000], H100) returned {mixed!r}; "
        "expected about 4.895 ms: the weights once, attention over the 10,600 tokens in all "
        "(padded to 8,000 each it would be 5.73 ms)"
    )
    for tpot, want in ((0.010, 68), (0.050, 214), (1e-4, 0)):
        got = student.max_batch_under_tpot(LLAMA3_8B, H100_LIKE, 2048, tpot)
        assert type(got) is int and got == want, (
            f"max_batch_under_tpot(Llama-3-8B, H100, 2048, tpot_s={tpot}) returned {got!r}; "
            f"expected {want} (the largest batch whose step meets the target and that fits)"
        )


@pytest.mark.points(1)
def test_chunked_prefill_and_decode_attention_examples(student, course_model):
    for gpu, batch, size, want in ((T4_LIKE, 1, 2, 202), (H100_LIKE, 1, 0.5, 72)):
        got = student.chunked_prefill_budget(gpu, batch, size)
        assert type(got) is int and got == want, (
            f"chunked_prefill_budget({gpu['name']}, batch={batch}, dtype_bytes={size}) returned "
            f"{got!r}; expected {want}: the tokens T with 2 T / dtype_bytes below the ridge, "
            "less the batch's own"
        )
    for args, want in (((LLAMA3_8B,), 4.0), ((LLAMA3_8B, 4), 16.0), ((course_model, 1, 1), 4.0)):
        got = student.decode_attention_intensity(*args)
        assert type(got) is float and got == want, (
            f"decode_attention_intensity{args[1:]} of {args[0]['name']} returned {got!r}; "
            f"expected {want} = 2 x spec_tokens x (n_heads / n_kv_heads) / kv_dtype_bytes"
        )
    plan = student.split_kv_plan(LLAMA3_8B, 1, 8192, H100_LIKE)
    want = {"blocks": 8, "splits": 28, "split_blocks": 224, "chunk_len": 293}
    assert plan == want, (
        f"split_kv_plan(Llama-3-8B, batch 1, 8192 tokens, H100) returned {plan!r}; expected "
        f"{want}: 8 K/V heads, 264 slots; the best wave efficiency is 32 splits' 256 / 264, and "
        "28 splits (224 / 264) are the fewest within 85% of it, chunks of ceil(8192 / 28) tokens"
    )
