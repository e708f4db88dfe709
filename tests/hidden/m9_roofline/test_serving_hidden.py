"""Hidden tests for M9's serving numbers: tokens/s ceilings, memory fit, decode split into its
kernels, prefill, TTFT and TPOT.

Configs, GPUs, batches, contexts and precisions are drawn at grading time and compared with the
reference solution; fixed examples hold the known wrong answers (the compute roof ignored, the
untied input table multiplied or left out of memory, the weights' precision used for the cache,
the whole card counted instead of its usable budget, the engine's runtime left outside it, a
kernel exactly on the ridge called memory-bound, the KV cache forgotten in prefill, the
output head computed for every prompt token) on every draw.

Stated rules (grader verify checks that every test here is listed, with a sentence that appears
word for word in the released notebook):

- test_decode_tokens_per_s_bound_random: "which returns the ceiling above as a Python `float` in
  tokens per second (for the whole batch, not per sequence)"
- test_kv_cache_fits_random: "`bool`: `True` when the weights, the runtime and the batch's KV
  cache take at most"
- test_serving_invalid_arguments: "a missing or non-positive figure raises `ValueError` and a
  figure that is not a number `TypeError` (`check_gpu` does both)."
- test_max_batch_that_fits_random: "Compute it exactly: a float division can land a hair under
  an integer and lose a whole sequence, so the grader checks that your batch fits and one more
  does not"
- test_decode_step_breakdown_random: "each a dict with the keys `flops`, `bytes`, `intensity`
  (FLOP/byte), `time_s` (seconds: the kernel's roofline time) and `bound`"
- test_prefill_time_random: "**the output head scores the last position only**"
- test_ttft_and_tpot_random: "which returns the tuple `(ttft_s, tpot_s)` of two Python floats."

PYTEST_DONT_REWRITE: pytest leaves these asserts alone, because their messages are what the
student reads as feedback.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from grader.suites.testing import expect_raises

FAST = settings.get_profile("grader-hidden")  # tests/hidden/conftest.py


GPU_KEYS = ("name", "peak_flops", "peak_bandwidth", "memory_bytes", "usable_memory_fraction")


def gpu_like(name: str, tflops: float, gbs: float, mib: int, sms: int) -> dict:
    """A gpu dict as load_hardware makes one, from course.toml's units."""
    figures = (name, tflops * 1e12, gbs * 1e9, mib * 2**20, 0.9)
    return {**dict(zip(GPU_KEYS, figures, strict=True)), "sm_count": sms}


T4_LIKE = gpu_like("T4", 65.0, 320.0, 15360, 40)
H100_LIKE = gpu_like("H100", 989.0, 3350.0, 81559, 132)
# A GPU whose ridge, as computed, is exactly 300.0 FLOP/byte, though 300.0 * peak_bandwidth
# rounds a hair below peak_flops (the product form would call the ridge memory-bound).
ON_RIDGE = {
    **H100_LIKE,
    "name": "on-ridge",
    "peak_flops": 365192658000780.06,
    "peak_bandwidth": 1217308860002.6,
}


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
    lambda flops, bw, mib, fraction: {
        "name": "testgpu",
        "peak_flops": flops,
        "peak_bandwidth": bw,
        "memory_bytes": mib * 2**20,
        "usable_memory_fraction": fraction,
        "sm_count": 40,  # grader: public
    },
    st.floats(min_value=1e12, max_value=2e15),
    st.floats(min_value=1e10, max_value=1e13),
    st.integers(min_value=1024, max_value=200_000),
    st.sampled_from([0.8, 0.9, 0.95, 1.0]),
)
# bytes per number: ints and the fractional sizes of 4-bit formats
precisions = st.sampled_from([0.5, 1, 2, 4, 1.5])
# Stands for the reference's LLAMA3_8B (untied: its 525M-weight input table is a lookup, not a
# matmul, yet resident in memory); an example is fixed at import time, the reference is not.
LLAMA_LIKE = "LLAMA3_8B"
# The engine's own bytes inside the budget (runtime_bytes); None: the default, RUNTIME_BYTES.
RUNTIMES = st.sampled_from([None, 0, 1, 10**9, 2**30, 3 * 2**30, 1.5e9])


def call_with_runtime(function, args, runtime):
    """function(*args), with runtime_bytes=runtime unless runtime is None (the default)."""
    return function(*args) if runtime is None else function(*args, runtime_bytes=runtime)


def runtime_of(reference, runtime):
    """The runtime bytes a call means: the reference's RUNTIME_BYTES for the default."""
    return reference.RUNTIME_BYTES if runtime is None else runtime


def show_runtime(runtime):
    return "runtime_bytes left at its default" if runtime is None else f"runtime_bytes={runtime!r}"


def resolve(cfg, reference, course_model=None):
    """An example's stand-in made real: None is the course model, LLAMA_LIKE the reference's
    LLAMA3_8B (a fresh copy); a drawn config is itself."""
    if cfg is None:
        return dict(course_model)
    if cfg == LLAMA_LIKE:
        return dict(reference.LLAMA3_8B)
    return cfg


@pytest.mark.points(2)
@FAST
@given(
    cfg=configs(),
    gpu=gpus,
    batch=st.integers(min_value=1, max_value=4096),
    context_len=st.integers(min_value=0, max_value=32768),
    nbytes=precisions,
    kv_nbytes=st.sampled_from([None, 1, 2, 4, 0.5]),
)
# Past the crossover only the compute roof binds: a bandwidth-only ceiling is wrong here.
@example(cfg=None, gpu=T4_LIKE, batch=1000, context_len=0, nbytes=2, kv_nbytes=None)
# An 8-bit cache beside fp16 weights: the cache's bytes use kv_dtype_bytes alone.
@example(cfg=LLAMA_LIKE, gpu=T4_LIKE, batch=8, context_len=512, nbytes=2, kv_nbytes=1)
def test_decode_tokens_per_s_bound_random(
    student, reference, course_model, cfg, gpu, batch, context_len, nbytes, kv_nbytes
):
    cfg = resolve(cfg, reference, course_model)
    got = student.decode_tokens_per_s_bound(cfg, gpu, batch, context_len, nbytes, kv_nbytes)
    want = reference.decode_tokens_per_s_bound(cfg, gpu, batch, context_len, nbytes, kv_nbytes)
    assert type(got) is float, f"decode_tokens_per_s_bound must return a Python float, got {got!r}"
    assert got == pytest.approx(want, rel=1e-9), (
        f"decode_tokens_per_s_bound({json.dumps(cfg)}, peak_flops={gpu['peak_flops']:.4g}, "
        f"peak_bandwidth={gpu['peak_bandwidth']:.4g}, batch={batch}, context_len={context_len}, "
        f"dtype_bytes={nbytes}, kv_dtype_bytes={kv_nbytes}) returned {got!r}; expected {want!r} "
        "tokens/s = batch / max(step bytes / peak_bandwidth, 2 * P * batch / peak_flops), with "
        "P = matmul_params and step bytes = P * dtype_bytes + batch * context_len * "
        "kv_bytes_per_token(cfg, kv_dtype_bytes or dtype_bytes), for the whole batch"
    )


@pytest.mark.points(2)
@FAST
@given(
    cfg=configs(),
    batch=st.integers(min_value=1, max_value=256),
    context_len=st.integers(min_value=0, max_value=16384),
    nbytes=precisions,
    kv_nbytes=st.sampled_from([None, 1, 2, 4, 0.5]),
    slack=st.sampled_from([-1, 0, 1, None]),
    memory=st.integers(min_value=10**9, max_value=2 * 10**11),
    fraction=st.sampled_from([0.8, 0.9, 1.0]),
    runtime=RUNTIMES,
)
# Always one case one byte short of weights plus KV cache: random draws may all fall where the
# answer does not depend on the cache, and then a cache left out would go unseen. cfg=None
# stands for the course model (an example is fixed at import time, the fixture is not).
@example(
    cfg=None,
    batch=1,
    context_len=512,
    nbytes=2,
    kv_nbytes=None,
    slack=-1,
    memory=10**9,
    fraction=1.0,
    runtime=None,
)
# Untied, one byte short: memory counts every parameter, the looked-up input table included.
@example(
    cfg=LLAMA_LIKE,
    batch=1,
    context_len=512,
    nbytes=2,
    kv_nbytes=1,
    slack=-1,
    memory=10**9,
    fraction=1.0,
    runtime=None,
)
# An 8-bit cache, memory exactly full: sized with the weights' 2 bytes it would not fit.
@example(
    cfg=None,
    batch=4,
    context_len=512,
    nbytes=2,
    kv_nbytes=1,
    slack=0,
    memory=10**9,
    fraction=1.0,
    runtime=None,
)
# And one exactly full: equal fits, so a `<` where `<=` belongs fails on every seed.
@example(
    cfg=None,
    batch=3,
    context_len=777,
    nbytes=2,
    kv_nbytes=None,
    slack=0,
    memory=10**9,
    fraction=1.0,
    runtime=None,
)
# The budget, not the card: the whole card would hold these weights with no runtime, 90% of it
# does not.
@example(
    cfg=LLAMA_LIKE,
    batch=1,
    context_len=0,
    nbytes=2,
    kv_nbytes=None,
    slack=None,
    memory=15360 * 2**20,
    fraction=0.9,
    runtime=0,
)
# runtime_bytes as given, not the default: an engine that needs nothing fills the budget exactly.
@example(
    cfg=None,
    batch=2,
    context_len=64,
    nbytes=2,
    kv_nbytes=None,
    slack=0,
    memory=10**9,
    fraction=1.0,
    runtime=0,
)
# A 1 GiB runtime, one byte short: the runtime comes out of the budget like the weights.
@example(
    cfg=LLAMA_LIKE,
    batch=3,
    context_len=300,
    nbytes=1,
    kv_nbytes=2,
    slack=-1,
    memory=10**9,
    fraction=1.0,
    runtime=2**30,
)
# memory_bytes an integer-valued float (16e9): a figure that may be fractional may be a float.
@example(
    cfg=LLAMA_LIKE,
    batch=1,
    context_len=0,
    nbytes=2,
    kv_nbytes=None,
    slack=None,
    memory=16e9,
    fraction=0.9,
    runtime=None,
)
# 4-bit weights beside a 4-bit cache, one byte over: fractional sizes all the way.
@example(
    cfg=None,
    batch=2,
    context_len=100,
    nbytes=0.5,
    kv_nbytes=None,
    slack=1,
    memory=10**9,
    fraction=1.0,
    runtime=None,
)
def test_kv_cache_fits_random(
    student,
    reference,
    course_model,
    cfg,
    batch,
    context_len,
    nbytes,
    kv_nbytes,
    slack,
    memory,
    fraction,
    runtime,
):
    cfg = resolve(cfg, reference, course_model)
    if slack is not None:  # a budget exactly at, one byte under or one byte over the need
        need = reference.num_params(cfg) * nbytes + runtime_of(reference, runtime)
        kv = reference.kv_bytes_per_token(cfg, nbytes if kv_nbytes is None else kv_nbytes)
        need += batch * context_len * kv
        memory, fraction = need + slack, 1.0
        if memory <= 0:
            return
    gpu = dict(T4_LIKE, memory_bytes=memory, usable_memory_fraction=fraction)
    args = (cfg, gpu, batch, context_len, nbytes, kv_nbytes)
    got = call_with_runtime(student.kv_cache_fits, args, runtime)
    want = call_with_runtime(reference.kv_cache_fits, args, runtime)
    assert type(got) is bool, f"kv_cache_fits must return a Python bool, got {got!r}"
    assert got is want, (
        f"kv_cache_fits({json.dumps(cfg)}, memory_bytes={memory!r}, usable_memory_fraction="
        f"{fraction}, batch={batch}, context_len={context_len}, dtype_bytes={nbytes}, "
        f"kv_dtype_bytes={kv_nbytes}, {show_runtime(runtime)}) returned {got}; expected {want}: "
        "num_params * dtype_bytes (every weight, the input table included) + runtime_bytes + "
        "batch * context_len * kv_bytes_per_token(cfg, kv_dtype_bytes or dtype_bytes) <= "
        "usable_memory_fraction * memory_bytes (equal fits; the budget, not the whole card, and "
        "the runtime inside it)"
    )


@pytest.mark.points(2)
@FAST
@given(
    cfg=configs(),
    context_len=st.integers(min_value=1, max_value=32768),
    wbytes=precisions,
    kbytes=st.sampled_from([None, 0.5, 1, 2, 4, 1.5]),
    memory=st.integers(min_value=10**8, max_value=2 * 10**11),
    fraction=st.sampled_from([0.8, 0.9, 0.95, 1.0]),
    exact=st.booleans(),
    runtime=RUNTIMES,
)
# Llama-3-8B on the H100's real 81,559 MiB, within 90%, beside the default 3 GiB runtime: 859
# (907 with the runtime left outside the budget, 987 with the whole card).
@example(
    cfg=LLAMA_LIKE,
    context_len=512,
    wbytes=2,
    kbytes=None,
    memory=81559 * 2**20,
    fraction=0.9,
    exact=False,
    runtime=None,
)
@example(
    cfg=LLAMA_LIKE,
    context_len=512,
    wbytes=0.5,
    kbytes=1,
    memory=15360 * 2**20,
    fraction=0.9,
    exact=False,
    runtime=None,
)
@example(
    cfg=LLAMA_LIKE,
    context_len=512,
    wbytes=2,
    kbytes=1,
    memory=80 * 10**9,
    fraction=1.0,
    exact=True,
    runtime=None,
)
# runtime_bytes as given: with none, 7 sequences fill the budget exactly.
@example(
    cfg=LLAMA_LIKE,
    context_len=512,
    wbytes=2,
    kbytes=None,
    memory=10**9,
    fraction=1.0,
    exact=True,
    runtime=0,
)
# The same H100 with the runtime counted as 1 GiB: 891, 16 sequences of 64 MiB fewer than 907.
@example(
    cfg=LLAMA_LIKE,
    context_len=512,
    wbytes=2,
    kbytes=None,
    memory=81559 * 2**20,
    fraction=0.9,
    exact=False,
    runtime=2**30,
)
# kv_dtype_bytes=None: the cache has the weights' size (an 8-bit model, an 8-bit cache).
@example(
    cfg=LLAMA_LIKE,
    context_len=512,
    wbytes=1,
    kbytes=None,
    memory=81559 * 2**20,
    fraction=0.9,
    exact=False,
    runtime=None,
)
def test_max_batch_that_fits_random(
    student, reference, cfg, context_len, wbytes, kbytes, memory, fraction, exact, runtime
):
    cfg = resolve(cfg, reference)
    if exact:  # a budget holding exactly some batch: floor must not lose it
        per_seq = context_len * reference.kv_bytes_per_token(cfg, 1) * (kbytes or wbytes)
        weights = reference.num_params(cfg) * wbytes + runtime_of(reference, runtime)
        memory, fraction = weights + 7 * per_seq, 1.0
    gpu = dict(T4_LIKE, memory_bytes=memory, usable_memory_fraction=fraction)
    args = (cfg, gpu, context_len, wbytes, kbytes)
    got = call_with_runtime(student.max_batch_that_fits, args, runtime)
    want = call_with_runtime(reference.max_batch_that_fits, args, runtime)
    assert type(got) is int, f"max_batch_that_fits must return a Python int, got {got!r}"
    assert got == want, (
        f"max_batch_that_fits({json.dumps(cfg)}, memory_bytes={memory!r}, "
        f"usable_memory_fraction={fraction}, context_len={context_len}, dtype_bytes={wbytes}, "
        f"kv_dtype_bytes={kbytes}, {show_runtime(runtime)}) returned {got}; expected {want}: "
        "floor((usable_memory_fraction * memory_bytes - num_params * dtype_bytes - "
        "runtime_bytes) / (context_len * kv_bytes_per_token(cfg, kv_dtype_bytes or "
        "dtype_bytes))), computed exactly, or 0 when the weights and the runtime alone do not fit"
    )


def assert_kernel(got: dict, want: dict, ridge: float, where: str) -> None:
    assert isinstance(got, dict), f"{where} must be a dict, got {type(got).__name__}"
    for key in ("flops", "bytes", "intensity", "time_s"):
        value = got.get(key)
        assert type(value) is float and value == pytest.approx(want[key], rel=1e-9), (
            f"{where}['{key}'] is {value!r}; expected the float {want[key]!r}"
        )
    # Within a rounding of the ridge (but not on it) the order of a float computation may decide;
    # exactly on the ridge, as computed, the rule is stated: compute-bound.
    tie = want["intensity"] != ridge and math.isclose(want["intensity"], ridge, rel_tol=1e-9)
    assert got.get("bound") == want["bound"] or tie, (
        f"{where}['bound'] is {got.get('bound')!r}; expected {want['bound']!r} (\"compute\" when "
        "the kernel's intensity flops / bytes is at or above the ridge peak_flops / "
        "peak_bandwidth, the two quotients compared as computed: on the ridge, compute-bound)"
    )


@pytest.mark.points(3)
@FAST
@given(
    cfg=configs(),
    gpu=gpus,
    batch=st.integers(min_value=1, max_value=2048),
    context_len=st.integers(min_value=1, max_value=32768),
    wbytes=precisions,
    kbytes=st.sampled_from([None, 0.5, 1, 2, 4, 1.5]),
)
# 4-bit weights beside an 8-bit cache: each term must use its own precision.
@example(cfg=LLAMA_LIKE, gpu=T4_LIKE, batch=64, context_len=512, wbytes=0.5, kbytes=1)
# The weights just past the T4's ridge (batch 204), attention stuck below it.
@example(cfg=None, gpu=T4_LIKE, batch=204, context_len=512, wbytes=2, kbytes=2)
# kv_dtype_bytes=None: the cache takes the weights' size.
@example(cfg=LLAMA_LIKE, gpu=T4_LIKE, batch=8, context_len=512, wbytes=1, kbytes=None)
# fp16 weights at batch 300 sit exactly on this GPU's ridge as computed (peak_flops /
# peak_bandwidth == 300.0), while 300 * peak_bandwidth rounds below peak_flops: compute-bound.
@example(cfg=None, gpu=ON_RIDGE, batch=300, context_len=16, wbytes=2, kbytes=2)
def test_decode_step_breakdown_random(
    student, reference, course_model, cfg, gpu, batch, context_len, wbytes, kbytes
):
    cfg = resolve(cfg, reference, course_model)
    got = student.decode_step_breakdown(cfg, batch, context_len, gpu, wbytes, kbytes)
    want = reference.decode_step_breakdown(cfg, batch, context_len, gpu, wbytes, kbytes)
    where = (
        f"decode_step_breakdown({json.dumps(cfg)}, batch={batch}, context_len={context_len}, "
        f"peak_flops={gpu['peak_flops']:.4g}, peak_bandwidth={gpu['peak_bandwidth']:.4g}, "
        f"dtype_bytes={wbytes}, kv_dtype_bytes={kbytes})"
    )
    assert isinstance(got, dict) and set(got) == {"weights", "attention", "time_s"}, (
        f"{where} must return a dict with exactly the keys 'weights', 'attention' and 'time_s'; "
        f"it returned {got!r}"
    )
    ridge = gpu["peak_flops"] / gpu["peak_bandwidth"]  # grader: public
    hints = {
        "weights": "FLOPs 2 * P * batch, bytes P * dtype_bytes (P = matmul_params)",
        "attention": "FLOPs 4 * n_layers * dim * context_len * batch, bytes batch * context_len "
        "* kv_bytes_per_token(cfg, 1) * (kv_dtype_bytes, or dtype_bytes when it is None)",
    }
    for kernel in ("weights", "attention"):
        assert_kernel(got[kernel], want[kernel], ridge, f"{where}['{kernel}'] ({hints[kernel]})")
    assert type(got["time_s"]) is float and got["time_s"] == pytest.approx(
        want["time_s"], rel=1e-9
    ), (
        f"{where}['time_s'] is {got['time_s']!r}; expected {want['time_s']!r} s, the two "
        "kernels' roofline times summed (they run one after the other)"
    )


@pytest.mark.points(2)
@FAST
@given(
    cfg=configs(),
    gpu=gpus,
    batch=st.integers(min_value=1, max_value=64),
    prompt_len=st.integers(min_value=1, max_value=8192),
    wbytes=precisions,
    kbytes=st.sampled_from([None, 0.5, 1, 2, 4, 1.5]),
)
# A one-token prompt of a tiny model is memory-bound: the KV cache it writes is part of its bytes.
@example(cfg=None, gpu=T4_LIKE, batch=1, prompt_len=1, wbytes=2, kbytes=2)
@example(cfg=None, gpu=T4_LIKE, batch=4, prompt_len=3, wbytes=0.5, kbytes=4)
# A long prompt: causal attention's n (n + 1) FLOPs, compute-bound.
@example(cfg=LLAMA_LIKE, gpu=H100_LIKE, batch=1, prompt_len=4096, wbytes=2, kbytes=2)
# The course model's tied head is 40% of its weights: scored for every prompt token, the
# compute-bound prefill would take two thirds longer.
@example(cfg=None, gpu=T4_LIKE, batch=64, prompt_len=2048, wbytes=2, kbytes=None)
def test_prefill_time_random(
    student, reference, course_model, cfg, gpu, batch, prompt_len, wbytes, kbytes
):
    cfg = resolve(cfg, reference, course_model)
    got = student.prefill_time(cfg, batch, prompt_len, gpu, wbytes, kbytes)
    want = reference.prefill_time(cfg, batch, prompt_len, gpu, wbytes, kbytes)
    assert type(got) is float, f"prefill_time must return a Python float, got {got!r}"
    assert got == pytest.approx(want, rel=1e-9), (
        f"prefill_time({json.dumps(cfg)}, batch={batch}, prompt_len={prompt_len}, "
        f"peak_flops={gpu['peak_flops']:.4g}, peak_bandwidth={gpu['peak_bandwidth']:.4g}, "
        f"dtype_bytes={wbytes}, kv_dtype_bytes={kbytes}) returned {got!r}; expected {want!r} s: "
        "the weights' roofline time (FLOPs 2 * batch * (n * (P - H) + H) with H = vocab_size * "
        "dim: the output head scores the last position only; bytes P * dtype_bytes) plus causal "
        "attention's (FLOPs batch * 2 * n_layers * dim * n * (n + 1), bytes the KV cache "
        "written, batch * n * kv_bytes_per_token(cfg, 1) * (kv_dtype_bytes or dtype_bytes))"
    )


@pytest.mark.points(1)
@FAST
@given(
    cfg=configs(),
    gpu=gpus,
    batch=st.integers(min_value=1, max_value=64),
    prompt_len=st.integers(min_value=1, max_value=8192),
    wbytes=precisions,
    kbytes=precisions,
)
@example(cfg=LLAMA_LIKE, gpu=H100_LIKE, batch=1, prompt_len=512, wbytes=2, kbytes=2)
def test_ttft_and_tpot_random(student, reference, cfg, gpu, batch, prompt_len, wbytes, kbytes):
    cfg = resolve(cfg, reference)
    got = student.ttft_and_tpot(cfg, batch, prompt_len, gpu, wbytes, kbytes)
    want = reference.ttft_and_tpot(cfg, batch, prompt_len, gpu, wbytes, kbytes)
    where = (
        f"ttft_and_tpot({json.dumps(cfg)}, batch={batch}, prompt_len={prompt_len}, "
        f"peak_flops={gpu['peak_flops']:.4g}, peak_bandwidth={gpu['peak_bandwidth']:.4g}, "
        f"dtype_bytes={wbytes}, kv_dtype_bytes={kbytes})"
    )
    assert type(got) is tuple and len(got) == 2 and all(type(v) is float for v in got), (
        f"{where} must return a tuple of two Python floats, got {got!r}"
    )
    for name, value, expected, rule in (
        ("TTFT", got[0], want[0], "the prefill time of the prompts"),
        ("TPOT", got[1], want[1], "one decode step with prompt_len tokens in the cache"),
    ):
        assert value == pytest.approx(expected, rel=1e-9), (
            f"{where}: {name} is {value!r}; expected {expected!r} s, {rule}"
        )


GPU_ERRORS = [
    ("gpu without peak_bandwidth", ValueError, {"name": "T4", "peak_flops": 65e12}),
    ("peak_bandwidth=0", ValueError, {**T4_LIKE, "peak_bandwidth": 0.0}),
    ("peak_flops='65e12'", TypeError, {**T4_LIKE, "peak_flops": "65e12"}),
    ("gpu='T4'", TypeError, "T4"),
]


def serving_cases(m):
    """(what, error, call(student)) for every serving function's bad arguments."""
    cases = []
    for why, error, gpu in GPU_ERRORS:
        cases += [
            (
                f"decode_tokens_per_s_bound(cfg, {why}, 1, 0)",
                error,
                lambda s, g=gpu: s.decode_tokens_per_s_bound(m, g, 1, 0),
            ),
            (
                f"decode_step_breakdown(cfg, 1, 16, {why})",
                error,
                lambda s, g=gpu: s.decode_step_breakdown(m, 1, 16, g),
            ),
            (
                f"prefill_time(cfg, 1, 16, {why})",
                error,
                lambda s, g=gpu: s.prefill_time(m, 1, 16, g),
            ),
        ]
    cases += [
        (
            "decode_tokens_per_s_bound(cfg, gpu, batch=0, 0)",
            ValueError,
            lambda s: s.decode_tokens_per_s_bound(m, T4_LIKE, 0, 0),
        ),
        (
            "decode_tokens_per_s_bound(cfg, gpu, 1, 0, kv_dtype_bytes='1')",
            TypeError,
            lambda s: s.decode_tokens_per_s_bound(m, T4_LIKE, 1, 0, 2, "1"),
        ),
        (
            "decode_tokens_per_s_bound(cfg, gpu, 1, 0, dtype_bytes=-0.5)",
            ValueError,
            lambda s: s.decode_tokens_per_s_bound(m, T4_LIKE, 1, 0, -0.5),
        ),
        (
            "kv_cache_fits(cfg, gpu without memory_bytes, 1, 0)",
            ValueError,
            lambda s: s.kv_cache_fits(
                m, {"name": "T4", "peak_bandwidth": 1e9, "usable_memory_fraction": 0.9}, 1, 0
            ),
        ),
        (
            "kv_cache_fits(cfg, memory_bytes=-1, 1, 0)",
            ValueError,
            lambda s: s.kv_cache_fits(m, {**T4_LIKE, "memory_bytes": -1.0}, 1, 0),
        ),
        (
            "kv_cache_fits(cfg, usable_memory_fraction=1.5, 1, 0)",
            ValueError,
            lambda s: s.kv_cache_fits(m, {**T4_LIKE, "usable_memory_fraction": 1.5}, 1, 0),
        ),
        (
            "kv_cache_fits(cfg, gpu without usable_memory_fraction, 1, 0)",
            ValueError,
            lambda s: s.kv_cache_fits(m, {"name": "T4", "memory_bytes": 10**9}, 1, 0),
        ),
        (
            "kv_cache_fits(cfg, gpu, 1, context_len=-1)",
            ValueError,
            lambda s: s.kv_cache_fits(m, T4_LIKE, 1, -1),
        ),
        (
            "kv_cache_fits(cfg, gpu, batch=2.0, 0)",
            TypeError,
            lambda s: s.kv_cache_fits(m, T4_LIKE, 2.0, 0),
        ),
        (
            "kv_cache_fits(config with an unknown key, gpu, 1, 0)",
            ValueError,
            lambda s: s.kv_cache_fits({**m, "layers": 2}, T4_LIKE, 1, 0),
        ),
        (
            "kv_cache_fits(cfg, gpu, 1, 0, runtime_bytes=-1)",
            ValueError,
            lambda s: s.kv_cache_fits(m, T4_LIKE, 1, 0, runtime_bytes=-1),
        ),
        (
            "max_batch_that_fits(cfg, gpu, 512, runtime_bytes='3e9')",
            TypeError,
            lambda s: s.max_batch_that_fits(m, T4_LIKE, 512, runtime_bytes="3e9"),
        ),
        (
            "max_batch_that_fits(cfg, gpu, context_len=0)",
            ValueError,
            lambda s: s.max_batch_that_fits(m, T4_LIKE, 0),
        ),
        (
            "max_batch_that_fits(cfg, gpu, 512, dtype_bytes=0)",
            ValueError,
            lambda s: s.max_batch_that_fits(m, T4_LIKE, 512, 0),
        ),
        (
            "max_batch_that_fits(cfg, gpu, 512, kv_dtype_bytes=True)",
            TypeError,
            lambda s: s.max_batch_that_fits(m, T4_LIKE, 512, 2, True),
        ),
        (
            "decode_step_breakdown(cfg, 1, context_len=0, gpu)",
            ValueError,
            lambda s: s.decode_step_breakdown(m, 1, 0, T4_LIKE),
        ),
        (
            "decode_step_breakdown(cfg, batch='1', 16, gpu)",
            TypeError,
            lambda s: s.decode_step_breakdown(m, "1", 16, T4_LIKE),
        ),
        (
            "decode_step_breakdown(cfg, 1, 16, gpu, dtype_bytes=-0.5)",
            ValueError,
            lambda s: s.decode_step_breakdown(m, 1, 16, T4_LIKE, -0.5),
        ),
        (
            "decode_step_breakdown(cfg, 1, 16, gpu, kv_dtype_bytes=float('inf'))",
            ValueError,
            lambda s: s.decode_step_breakdown(m, 1, 16, T4_LIKE, 2, float("inf")),
        ),
        (
            "prefill_time(cfg, 1, prompt_len=0, gpu)",
            ValueError,
            lambda s: s.prefill_time(m, 1, 0, T4_LIKE),
        ),
        (
            "prefill_time(cfg, 1, 16, gpu, dtype_bytes='2')",
            TypeError,
            lambda s: s.prefill_time(m, 1, 16, T4_LIKE, "2"),
        ),
        (
            "ttft_and_tpot(cfg, batch=0, 16, gpu)",
            ValueError,
            lambda s: s.ttft_and_tpot(m, 0, 16, T4_LIKE),
        ),
        (
            "ttft_and_tpot(cfg, 1, prompt_len=16.0, gpu)",
            TypeError,
            lambda s: s.ttft_and_tpot(m, 1, 16.0, T4_LIKE),
        ),
    ]
    return cases


@pytest.mark.points(2)
def test_serving_invalid_arguments(student, course_model):
    for what, error, call in serving_cases(course_model):
        expect_raises(
            lambda c=call: c(student),
            error,
            what,
            "check the gpu dict, batch, context, precisions and config (the notebook's "
            "convention: TypeError for a wrong type, ValueError for a value out of range)",
        )
