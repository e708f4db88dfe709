"""Hidden tests for M9's serving numbers: the tokens/s ceiling and whether the batch fits.

Configs, GPUs, batches and contexts are drawn at grading time and compared with the reference
solution.

Stated rules (grader verify checks that every test here is listed, with a sentence that appears
word for word in the released notebook):

- test_decode_tokens_per_s_bound_random: "which returns the ceiling above as a Python `float` in
  tokens per second (for the whole batch, not per sequence)"
- test_kv_cache_fits_random: "returns a Python `bool`: `True` when the weights plus the batch's
  KV cache take at most"
- test_serving_invalid_arguments: "and a missing or non-positive figure raises `ValueError`
  (`check_gpu` does that)."

PYTEST_DONT_REWRITE: pytest leaves these asserts alone, because their messages are what the
student reads as feedback.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from grader.suites.testing import expect_value_error

FAST = settings.get_profile("grader-hidden")  # tests/hidden/conftest.py
# grader: public
T4_LIKE = {"name": "T4", "peak_flops": 65e12, "peak_bandwidth": 320e9, "memory_bytes": 16e9}


@st.composite
def configs(draw):
    n_kv_heads = draw(st.sampled_from([1, 2, 4, 8]))
    n_heads = n_kv_heads * draw(st.sampled_from([1, 2, 4]))
    head_dim = draw(st.sampled_from([16, 32, 64, 128]))
    return {
        "dim": n_heads * head_dim,
        "n_layers": draw(st.integers(min_value=1, max_value=48)),
        "n_heads": n_heads,
        "n_kv_heads": n_kv_heads,
        "vocab_size": draw(st.integers(min_value=2, max_value=200_000)),
        "ffn_hidden_dim": draw(st.integers(min_value=1, max_value=20_000)),
        "tied_embeddings": draw(st.booleans()),
    }


gpus = st.builds(
    lambda bw, mem: {
        "name": "testgpu",
        "peak_flops": 1e14,
        "peak_bandwidth": bw,
        "memory_bytes": mem,
    },
    st.floats(min_value=1e10, max_value=1e13),
    st.floats(min_value=1e9, max_value=2e11),
)


@pytest.mark.points(2)
@FAST
@given(
    cfg=configs(),
    gpu=gpus,
    batch=st.integers(min_value=1, max_value=512),
    context_len=st.integers(min_value=0, max_value=32768),
    nbytes=st.sampled_from([1, 2, 4]),
)
def test_decode_tokens_per_s_bound_random(student, reference, cfg, gpu, batch, context_len, nbytes):
    got = student.decode_tokens_per_s_bound(cfg, gpu, batch, context_len, nbytes)
    want = reference.decode_tokens_per_s_bound(cfg, gpu, batch, context_len, nbytes)
    assert type(got) is float, f"decode_tokens_per_s_bound must return a Python float, got {got!r}"
    assert got == pytest.approx(want, rel=1e-9), (
        f"decode_tokens_per_s_bound({json.dumps(cfg)}, peak_bandwidth={gpu['peak_bandwidth']:.4g}, "
        f"batch={batch}, context_len={context_len}, dtype_bytes={nbytes}) returned {got!r}; "
        f"expected {want!r} tokens/s = batch / ((params * dtype_bytes + batch * context_len * "
        "KV bytes per token) / peak_bandwidth), for the whole batch"
    )


@pytest.mark.points(2)
@FAST
@given(
    cfg=configs(),
    batch=st.integers(min_value=1, max_value=256),
    context_len=st.integers(min_value=0, max_value=16384),
    nbytes=st.sampled_from([1, 2, 4]),
    slack=st.sampled_from([-1, 0, 1, None]),
    memory=st.floats(min_value=1e9, max_value=2e11),
)
# Always one case one byte short of weights plus KV cache: random draws may all fall where the
# answer does not depend on the cache, and then a cache left out would go unseen. cfg=None
# stands for the course model (an example is fixed at import time, the fixture is not).
@example(cfg=None, batch=1, context_len=512, nbytes=2, slack=-1, memory=1e9)
# And one exactly full: equal fits, so a `<` where `<=` belongs fails on every seed.
@example(cfg=None, batch=3, context_len=777, nbytes=2, slack=0, memory=1e9)
def test_kv_cache_fits_random(
    student, reference, course_model, cfg, batch, context_len, nbytes, slack, memory
):
    cfg = course_model if cfg is None else cfg
    if slack is not None:  # a memory exactly at, one byte under or one byte over the need
        need = reference.num_params(cfg) * nbytes
        need += batch * context_len * reference.kv_bytes_per_token(cfg, nbytes)
        memory = float(need + slack)
        if memory <= 0:
            return
    gpu = {**T4_LIKE, "memory_bytes": memory}
    got = student.kv_cache_fits(cfg, gpu, batch, context_len, nbytes)
    want = reference.kv_cache_fits(cfg, gpu, batch, context_len, nbytes)
    assert type(got) is bool, f"kv_cache_fits must return a Python bool, got {got!r}"
    assert got is want, (
        f"kv_cache_fits({json.dumps(cfg)}, memory_bytes={memory:.12g}, batch={batch}, "
        f"context_len={context_len}, dtype_bytes={nbytes}) returned {got}; expected {want}: "
        "params * dtype_bytes + batch * context_len * KV bytes per token <= memory_bytes "
        "(equal fits)"
    )


@pytest.mark.points(1)
def test_serving_invalid_arguments(student, course_model):
    cases = [
        (
            "decode_tokens_per_s_bound(cfg, gpu without peak_bandwidth, 1, 0)",
            lambda: student.decode_tokens_per_s_bound(course_model, {"name": "T4"}, 1, 0),
        ),
        (
            "decode_tokens_per_s_bound(cfg, peak_bandwidth=0, 1, 0)",
            lambda: student.decode_tokens_per_s_bound(
                course_model, {**T4_LIKE, "peak_bandwidth": 0.0}, 1, 0
            ),
        ),
        (
            "decode_tokens_per_s_bound(cfg, gpu, batch=0, 0)",
            lambda: student.decode_tokens_per_s_bound(course_model, T4_LIKE, 0, 0),
        ),
        (
            "kv_cache_fits(cfg, gpu without memory_bytes, 1, 0)",
            lambda: student.kv_cache_fits(
                course_model, {"name": "T4", "peak_bandwidth": 1e9}, 1, 0
            ),
        ),
        (
            "kv_cache_fits(cfg, memory_bytes=-1, 1, 0)",
            lambda: student.kv_cache_fits(course_model, {**T4_LIKE, "memory_bytes": -1.0}, 1, 0),
        ),
        (
            "kv_cache_fits(cfg, gpu, 1, context_len=-1)",
            lambda: student.kv_cache_fits(course_model, T4_LIKE, 1, -1),
        ),
        (
            "kv_cache_fits(config with an unknown key, gpu, 1, 0)",
            lambda: student.kv_cache_fits({**course_model, "layers": 2}, T4_LIKE, 1, 0),
        ),
    ]
    for what, call in cases:
        expect_value_error(call, what, "check the gpu dict, batch, context_len and config")
