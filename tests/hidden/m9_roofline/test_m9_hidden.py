"""Hidden tests for S5.2, milestone M9 (never shipped to students).

Model configs, contexts and hardware are drawn at grading time (hypothesis) and every answer is
compared with the reference solution (the `reference` fixture, loaded in the trusted process).
metrics.json['m9_roofline'] earns points only when the student's own m9_record, called in the
sandbox with the model, GPU, context and dtype the record names, reproduces it, the reference
functions recomputing it from the grader's own figures for the course GPU agree, the model is a
valid LLaMA-style config with at least the course model's number of weights, and the student's
m9_record also agrees with the reference on configs, GPUs and contexts drawn per student: a
hand-written record, a lookup table of the one config, or a toy config earns nothing.

Stated rules (grader verify checks that every test here is listed, with a sentence that appears
word for word in the released notebook):

- test_num_params_random_configs: "Number of weights (an int) of the LLaMA-style model described
  by `cfg`."
- test_matmul_params_random_configs: "Number of weights (an int) a decode step reads and
  multiplies: num_params(cfg), less the input embedding table (vocab_size * dim) when
  tied_embeddings is False."
- test_kv_bytes_per_token_random_configs: "Computed as written, the result is an `int` when
  `dtype_bytes` is an int and a `float` when it is a float"
- test_decode_intensity_random: "Arithmetic intensity (FLOP/byte, a float) of one decode step."
- test_crossover_batch_random: "The result agrees with decode_intensity: intensity(b) >= ridge
  and, for b > 1, intensity(b - 1) < ridge."
- test_crossover_batch_none_at_long_context: "Returns None when the intensity's limit
  2*matmul_params / (context_len * KV bytes per token) is <= ridge."
- test_invalid_arguments_raise: "A value of the right type that is out of range raises
  `ValueError`: zero, negative, NaN, infinite, too large"
- test_m9_record_random: "Returns the keys intensity_b1, intensity_b8, intensity_b32 (FLOP/byte,
  floats), crossover_batch (int or None, against the ridge peak_flops / peak_bandwidth)"
- test_metrics_records_course_gpu_and_valid_inputs: "its `gpu` must be the course GPU as
  `load_hardware()` reads it (the grader checks the figures against its own `course.toml`)"
- test_metrics_recomputed: "the grader calls your `m9_record` with the model, GPU, context and
  dtype the record names and credits the record only when it gets the same figures back"
- test_metrics_conclusion: "the conclusion must call it bandwidth-bound and
  `says_bandwidth_bound(conclusion)` must be True"
- test_save_metric_keeps_other_keys: "**take the path as a `str` or a `pathlib.Path`** (the
  grader passes both;"

Every metrics test also states, in its feedback, the two rules of section 13 it applies to the
record: "which means at least as many weights as the course model" and "credits the record only
when every answer agrees with the reference solution".

PYTEST_DONT_REWRITE: pytest leaves these asserts alone, because their messages are what the
student reads as feedback.
"""

from __future__ import annotations

import json
import math
import re
import uuid

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from grader.suites.student import StudentError
from grader.suites.testing import expect_raises, require_course_size, require_reproduced

FAST = settings.get_profile("grader-hidden")  # tests/hidden/conftest.py
RECORD = "m9_roofline"
INTENSITY_KEYS = ("intensity_b1", "intensity_b8", "intensity_b32")
METRICS_MAX_BYTES = 1 << 20  # grader: public


@st.composite
def configs(draw):
    """Valid LLaMA-style configs: GQA head counts, head_dim dividing dim, optional name."""
    n_kv_heads = draw(st.sampled_from([1, 2, 4, 8]))
    n_heads = n_kv_heads * draw(st.sampled_from([1, 2, 4]))
    head_dim = draw(st.sampled_from([8, 16, 32, 64, 128]))
    cfg = {
        "dim": n_heads * head_dim,
        "n_layers": draw(st.integers(min_value=1, max_value=48)),
        "n_heads": n_heads,
        "n_kv_heads": n_kv_heads,
        "vocab_size": draw(st.integers(min_value=2, max_value=200_000)),
        "ffn_hidden_dim": draw(st.integers(min_value=1, max_value=20_000)),
        "tied_embeddings": draw(st.booleans()),
    }
    if draw(st.booleans()):
        cfg["name"] = draw(
            st.text(alphabet="abcdefghijklmnopqrstuvwxyz-0123456789", min_size=1, max_size=16)
        )
    return cfg


# bytes per number: ints, and the fractional sizes of 4-bit formats and measured averages
dtype_bytes = st.sampled_from([1, 2, 2, 4, 0.5, 0.72])
ridges = st.floats(min_value=0.5, max_value=2000.0)


def show(cfg: dict) -> str:
    return json.dumps(cfg, sort_keys=True)


def crossover_matches(reference, got, want, cfg, ridge, context_len, nbytes) -> bool:
    """got equals the reference, or differs only where the intensity sits on the ridge.

    Two correct programs may round the last bit of the intensity differently; at a batch whose
    intensity equals the ridge to 1e-9 either neighbouring answer is accepted.
    """
    if got == want and type(got) is type(want):
        return True
    if type(got) is not int or got < 1:
        return False
    if want is None:
        kv = reference.kv_bytes_per_token(cfg, nbytes)
        limit = 2 * reference.matmul_params(cfg) / (context_len * kv)
        return math.isclose(limit, ridge, rel_tol=1e-9)
    if abs(got - want) != 1:
        return False
    edge = reference.decode_intensity(cfg, min(got, want), context_len, nbytes)
    return math.isclose(edge, ridge, rel_tol=1e-9)


# ---------------------------------------------------------------------------------------------
# The arithmetic, on random configs


@pytest.mark.points(2)
@FAST
@given(cfg=configs())
def test_num_params_random_configs(student, reference, cfg):
    got = student.num_params(cfg)
    want = reference.num_params(cfg)
    assert type(got) is int, f"num_params must return a Python int, got {got!r}"  # grader: public
    assert got == want, (
        f"num_params({show(cfg)}) returned {got:,}; expected {want:,} (off by {got - want:+,}). "
        "Count the embedding, per layer wq/wo (dim x dim), wk/wv (dim x n_kv_heads*head_dim), "
        "w1/w2/w3 (dim x ffn_hidden_dim) and two RMSNorm gains, the final RMSNorm, and the output "
        "head only when tied_embeddings is False"
    )


# Stands for the reference's LLAMA3_8B (untied: its 525M-weight input table is a lookup, not a
# matmul, yet resident in memory); an example is fixed at import time, the reference is not.
LLAMA_LIKE = "LLAMA3_8B"


def resolve(cfg, reference, course_model=None):
    """An example's stand-in made real: None is the course model, LLAMA_LIKE the reference's
    LLAMA3_8B (a fresh copy); a drawn config is itself."""
    if cfg is None:
        return dict(course_model)
    if cfg == LLAMA_LIKE:
        return dict(reference.LLAMA3_8B)
    return cfg


@pytest.mark.points(1)
@FAST
@given(cfg=configs())
@example(cfg=LLAMA_LIKE)
def test_matmul_params_random_configs(student, reference, cfg):
    cfg = resolve(cfg, reference)
    got = student.matmul_params(cfg)
    want = reference.matmul_params(cfg)
    assert type(got) is int, f"matmul_params must return a Python int, got {got!r}"
    assert got == want, (
        f"matmul_params({show(cfg)}) returned {got:,}; expected {want:,} (off by "
        f"{got - want:+,}): num_params(cfg), less vocab_size * dim when tied_embeddings is False "
        "(the untied input table is looked up, not multiplied; a tied table is also the output "
        "head, so it counts)"
    )


@pytest.mark.points(2)
@FAST
@given(cfg=configs(), nbytes=dtype_bytes)
def test_kv_bytes_per_token_random_configs(student, reference, cfg, nbytes):
    got = student.kv_bytes_per_token(cfg, nbytes)
    want = reference.kv_bytes_per_token(cfg, nbytes)
    kind = type(want).__name__
    assert type(got) is type(want), (
        f"kv_bytes_per_token(cfg, dtype_bytes={nbytes!r}) must return a Python {kind} (an int "
        f"for an int size, a float for a float size), got {got!r}"
    )
    assert got == pytest.approx(want, rel=1e-12), (
        f"kv_bytes_per_token({show(cfg)}, dtype_bytes={nbytes}) returned {got}; expected {want} "
        "= 2 (K and V) x n_layers x n_kv_heads x head_dim x dtype_bytes (KV heads, not query "
        "heads: grouped-query attention caches only n_kv_heads)"
    )


@pytest.mark.points(2)
@FAST
@given(
    cfg=configs(),
    batch=st.integers(min_value=1, max_value=4096),
    context_len=st.integers(min_value=0, max_value=32768),
    nbytes=dtype_bytes,
)
# The untied input embedding is a lookup: multiplying it too is the classic wrong answer.
@example(cfg=LLAMA_LIKE, batch=1, context_len=512, nbytes=2)
def test_decode_intensity_random(student, reference, cfg, batch, context_len, nbytes):
    cfg = resolve(cfg, reference)
    got = student.decode_intensity(cfg, batch, context_len, nbytes)
    want = reference.decode_intensity(cfg, batch, context_len, nbytes)
    assert isinstance(got, float), f"decode_intensity must return a float, got {got!r}"
    assert got == pytest.approx(want, rel=1e-9), (
        f"decode_intensity({show(cfg)}, batch={batch}, context_len={context_len}, "
        f"dtype_bytes={nbytes}) returned {got!r}; expected {want!r} FLOP/byte = 2*P*batch / "
        "(P*dtype_bytes + batch*context_len*kv_bytes_per_token) with P = matmul_params(cfg)"
    )


@pytest.mark.points(2)
@FAST
@given(
    cfg=configs(),
    ridge=ridges,
    context_len=st.integers(min_value=0, max_value=4096),
    nbytes=dtype_bytes,
)
# Always one case with a finite crossover: random draws may all land where no batch reaches the
# ridge, and then a wrong parameter count would go unseen. cfg=None stands for the course model
# (an example is fixed at import time, the course model is the `course_model` fixture's).
@example(cfg=None, ridge=2.0, context_len=512, nbytes=2)
@example(cfg=LLAMA_LIKE, ridge=203.125, context_len=512, nbytes=2)
# And one just under the intensity's limit (about 5 FLOP/byte at context 512), where the answer
# (492) moves with every parameter: a count off by one RMSNorm (128) gives 497.
@example(cfg=None, ridge=4.954, context_len=512, nbytes=2)
# 4-bit weights and cache: the crossover is a quarter of the fp16 one without a cache.
@example(cfg=None, ridge=100.0, context_len=0, nbytes=0.5)
def test_crossover_batch_random(student, reference, course_model, cfg, ridge, context_len, nbytes):
    cfg = resolve(cfg, reference, course_model)
    got = student.crossover_batch(cfg, ridge, context_len, nbytes)
    want = reference.crossover_batch(cfg, ridge, context_len, nbytes)
    assert got is None or type(got) is int, (
        f"crossover_batch must return an int or None, got {got!r} ({type(got).__name__})"
    )
    assert crossover_matches(reference, got, want, cfg, ridge, context_len, nbytes), (
        f"crossover_batch({show(cfg)}, ridge={ridge!r}, context_len={context_len}, "
        f"dtype_bytes={nbytes}) returned {got!r}; expected {want!r}: the smallest batch b with "
        "decode_intensity(b) >= ridge (and decode_intensity(b - 1) < ridge), or None when the "
        "intensity's limit 2*matmul_params / (context_len * KV bytes per token) is <= ridge"
    )


@pytest.mark.points(2)
@FAST
@given(
    cfg=configs(),
    ridge=st.floats(min_value=20.0, max_value=1000.0),
    factor=st.floats(min_value=1.01, max_value=50.0),
    nbytes=dtype_bytes,
)
def test_crossover_batch_none_at_long_context(student, reference, cfg, ridge, factor, nbytes):
    kv = reference.kv_bytes_per_token(cfg, nbytes)
    # Past this context the intensity's limit 2*P / (context_len*kv) is below the ridge.
    context_len = math.ceil(2 * reference.matmul_params(cfg) / (ridge * kv) * factor) + 1
    assume(reference.crossover_batch(cfg, ridge, context_len, nbytes) is None)
    got = student.crossover_batch(cfg, ridge, context_len, nbytes)
    limit = 2 * reference.matmul_params(cfg) / (context_len * kv)
    assert got is None, (
        f"crossover_batch({show(cfg)}, ridge={ridge!r}, context_len={context_len}, "
        f"dtype_bytes={nbytes}) returned {got!r}; expected None: as the batch grows the intensity "
        f"only approaches 2*matmul_params / (context_len * KV bytes per token) = {limit:.4g} "
        "FLOP/byte, "
        "which is below the ridge, so no batch ever reaches it"
    )


# (why, the error, the course model edited to break it)
BROKEN = [
    ("unknown key 'n_layer'", ValueError, lambda m: {**m, "n_layer": 4}),
    ("missing key 'dim'", ValueError, lambda m: {k: v for k, v in m.items() if k != "dim"}),
    ("n_layers = 0", ValueError, lambda m: {**m, "n_layers": 0}),
    ("dim 128 not a multiple of n_heads 3", ValueError, lambda m: {**m, "n_heads": 3}),
    ("n_heads 4 not a multiple of n_kv_heads 3", ValueError, lambda m: {**m, "n_kv_heads": 3}),
    ("dim = 128.0 (a float)", TypeError, lambda m: {**m, "dim": 128.0}),
    ("n_layers = True (a bool)", TypeError, lambda m: {**m, "n_layers": True}),
    ("tied_embeddings = 1 (not a bool)", TypeError, lambda m: {**m, "tied_embeddings": 1}),
    (
        "tied_embeddings = numpy.bool_(True) (not Python's bool)",
        TypeError,
        lambda m: {**m, "tied_embeddings": np.bool_(True)},
    ),
]
T4_LIKE = {"name": "T4", "peak_flops": 65e12, "peak_bandwidth": 320e9}
# (what, error, call(student, course model), hint)
INVALID = [
    *[
        (
            f"num_params(config with {why})",
            error,
            (lambda e: lambda s, m: s.num_params(e(m)))(edit),
            "validate the config first: exact keys, positive ints, a bool, heads dividing evenly",
        )
        for why, error, edit in BROKEN
    ],
    (
        "num_params(a list instead of a dict)",
        TypeError,
        lambda s, m: s.num_params(list(m.items())),
        "a config that is not a dict is a TypeError",
    ),
    (
        "matmul_params(config with an unknown key)",
        ValueError,
        lambda s, m: s.matmul_params({**m, "layers": 2}),
        "validate the config",
    ),
    (
        "kv_bytes_per_token(config with an unknown key)",
        ValueError,
        lambda s, m: s.kv_bytes_per_token({**m, "layers": 2}),
        "validate the config",
    ),
    (
        "kv_bytes_per_token(cfg, dtype_bytes=0)",
        ValueError,
        lambda s, m: s.kv_bytes_per_token(m, 0),
        "dtype_bytes must be a positive int",
    ),
    (
        "kv_bytes_per_token(cfg, dtype_bytes='2')",
        TypeError,
        lambda s, m: s.kv_bytes_per_token(m, "2"),
        "dtype_bytes must be a number: a str is a TypeError",
    ),
    (
        "kv_bytes_per_token(cfg, dtype_bytes=nan)",
        ValueError,
        lambda s, m: s.kv_bytes_per_token(m, float("nan")),
        "dtype_bytes must be a positive, finite number",
    ),
    (
        "decode_intensity(cfg, batch=0, 16)",
        ValueError,
        lambda s, m: s.decode_intensity(m, 0, 16),
        "batch must be >= 1",
    ),
    (
        "decode_intensity(cfg, batch=True, 16)",
        TypeError,
        lambda s, m: s.decode_intensity(m, True, 16),
        "a bool is not an integer here",
    ),
    (
        "decode_intensity(cfg, 1, context_len=-1)",
        ValueError,
        lambda s, m: s.decode_intensity(m, 1, -1),
        "context_len must be >= 0",
    ),
    (
        "decode_intensity(cfg, 1, context_len=16.0)",
        TypeError,
        lambda s, m: s.decode_intensity(m, 1, 16.0),
        "context_len must be an int",
    ),
    (
        "crossover_batch(cfg, ridge=0, 512)",
        ValueError,
        lambda s, m: s.crossover_batch(m, 0.0, 512),
        "ridge must be > 0",
    ),
    (
        "crossover_batch(cfg, ridge=-1, 512)",
        ValueError,
        lambda s, m: s.crossover_batch(m, -1.0, 512),
        "ridge must be > 0",
    ),
    (
        "crossover_batch(cfg, ridge='203', 512)",
        TypeError,
        lambda s, m: s.crossover_batch(m, "203", 512),
        "ridge must be a number",
    ),
    (
        "crossover_batch(cfg, 203, context_len=-5)",
        ValueError,
        lambda s, m: s.crossover_batch(m, 203.0, -5),
        "context_len must be >= 0",
    ),
    (
        "m9_record(cfg, gpu with peak_bandwidth 0, 512)",
        ValueError,
        lambda s, m: s.m9_record(m, {**T4_LIKE, "peak_bandwidth": 0.0}, 512),
        "peak figures must be positive",
    ),
    (
        "m9_record(cfg, gpu with peak_flops '65e12', 512)",
        TypeError,
        lambda s, m: s.m9_record(m, {**T4_LIKE, "peak_flops": "65e12"}, 512),
        "a figure that is not a number is a TypeError",
    ),
    (
        "m9_record(cfg, 'T4', 512)",
        TypeError,
        lambda s, m: s.m9_record(m, "T4", 512),
        "the gpu is a dict like load_hardware()['T4']",
    ),
    (
        "save_metric(path, key='', value)",
        ValueError,
        lambda s, m: s.save_metric(f"scratch-{uuid.uuid4().hex}.json", "", 1),
        "the key must not be empty",
    ),
    (
        "save_metric(path, key=3, value)",
        TypeError,
        lambda s, m: s.save_metric(f"scratch-{uuid.uuid4().hex}.json", 3, 1),
        "a key that is not a str is a TypeError",
    ),
    (
        "save_metric(path, key, value=numpy array)",
        TypeError,
        lambda s, m: s.save_metric(f"scratch-{uuid.uuid4().hex}.json", "k", np.zeros(2)),
        "a value JSON cannot represent is a TypeError",
    ),
    (
        "save_metric(path, key, value=nan)",
        ValueError,
        lambda s, m: s.save_metric(f"scratch-{uuid.uuid4().hex}.json", "k", float("nan")),
        "NaN is a ValueError",
    ),
]


@pytest.mark.points(4)  # 29 cases, each worth at least 1/8 point (grader.core.points)
@pytest.mark.parametrize("what,error,call,hint", INVALID, ids=[case[0] for case in INVALID])
def test_invalid_arguments_raise(
    student, course_model, what, error, call, hint, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    expect_raises(
        lambda: call(student, course_model),
        error,
        what,
        hint + " (the notebook's convention: TypeError for a wrong type, ValueError for a value "
        "out of range)",
    )


@pytest.mark.points(2)
@FAST
@given(
    cfg=configs(),
    flops=st.floats(min_value=1e12, max_value=2e15),
    bandwidth=st.floats(min_value=1e10, max_value=1e13),
    context_len=st.integers(min_value=0, max_value=8192),
)
def test_m9_record_random(student, reference, cfg, flops, bandwidth, context_len):
    gpu = {"name": "testgpu", "peak_flops": flops, "peak_bandwidth": bandwidth}
    got = student.m9_record(cfg, gpu, context_len)
    want = reference.m9_record(cfg, gpu, context_len)
    assert isinstance(got, dict), f"m9_record must return a dict, got {type(got).__name__}"
    missing = sorted(set(want) - set(got))
    assert not missing, f"m9_record's dict is missing {missing}"
    where = f"m9_record({show(cfg)}, {gpu}, context_len={context_len})"
    for key in INTENSITY_KEYS:
        assert isinstance(got[key], float) and got[key] == pytest.approx(want[key], rel=1e-9), (
            f"{where}['{key}'] is {got[key]!r}; expected {want[key]!r} FLOP/byte"
        )
    ridge = flops / bandwidth
    assert crossover_matches(
        reference, got["crossover_batch"], want["crossover_batch"], cfg, ridge, context_len, 2
    ), (
        f"{where}['crossover_batch'] is {got['crossover_batch']!r}; expected "
        f"{want['crossover_batch']!r} against the ridge peak_flops / peak_bandwidth = {ridge:.4g}"
    )
    assert got["params"] == want["params"] and type(got["params"]) is int, (
        f"{where}['params'] is {got['params']!r}; expected {want['params']}"
    )
    assert got["context_len"] == context_len and got["dtype_bytes"] == 2, (
        f"{where} must record context_len={context_len} and dtype_bytes=2, got "
        f"{got['context_len']!r} and {got['dtype_bytes']!r}"
    )
    assert got["model"] == cfg and got["gpu"] == gpu, (
        "m9_record must record copies of the config ('model') and of the gpu dict ('gpu')"
    )
    assert (
        isinstance(got["conclusion"], str)
        and got["conclusion"].strip()
        and "\n" not in got["conclusion"]
    ), f"{where}['conclusion'] must be one non-empty line, got {got['conclusion']!r}"


# ---------------------------------------------------------------------------------------------
# metrics.json, recomputed from what it records


@st.composite
def probes(draw):
    """A config, GPU and context the student's m9_record must get right, drawn per student."""
    gpu = {
        "name": "probe-gpu",
        "peak_flops": draw(st.floats(min_value=1e12, max_value=2e15)),
        "peak_bandwidth": draw(st.floats(min_value=1e10, max_value=1e13)),
    }
    return draw(configs()), gpu, draw(st.integers(min_value=0, max_value=8192))


PROBES = settings(FAST, max_examples=3)  # each example of a metrics test probes m9_record once


def require_general(student, reference, probe) -> None:
    """The record earns points only when the student's m9_record is right on a drawn input too."""
    cfg, gpu, context_len = probe
    call = f"m9_record({show(cfg)}, {gpu}, context_len={context_len})"
    rule = (
        f"metrics.json['{RECORD}'] earns points only when your m9_record is right in general: "
        "the grader credits the record only when every answer agrees with the reference solution"
    )
    try:
        got = student.m9_record(cfg, gpu, context_len)
    except StudentError as exc:
        pytest.fail(f"{rule}, and {call} failed: {exc.feedback()}", pytrace=False)
    want = reference.m9_record(cfg, gpu, context_len)
    if not isinstance(got, dict):  # grader: public
        pytest.fail(f"{rule}; {call} returned {type(got).__name__}, not a dict", pytrace=False)
    for key in INTENSITY_KEYS:
        value = got.get(key)
        if not (type(value) is float and math.isclose(value, want[key], rel_tol=1e-9)):
            pytest.fail(
                f"{rule}; {call}['{key}'] is {value!r}, expected {want[key]!r}", pytrace=False
            )
    ridge = gpu["peak_flops"] / gpu["peak_bandwidth"]  # grader: public
    if not crossover_matches(
        reference, got.get("crossover_batch"), want["crossover_batch"], cfg, ridge, context_len, 2
    ):
        pytest.fail(
            f"{rule}; {call}['crossover_batch'] is {got.get('crossover_batch')!r}, expected "
            f"{want['crossover_batch']!r}",
            pytrace=False,
        )
    if got.get("params") != want["params"] or type(got.get("params")) is not int:
        pytest.fail(
            f"{rule}; {call}['params'] is {got.get('params')!r}, expected {want['params']}",
            pytrace=False,
        )


def checked_record(metrics, reference, course, student, probe):
    """The record, its inputs checked, reproduced by the student's own m9_record, which is also
    right on a drawn probe."""
    record = m9_entry(metrics)
    cfg, context_len, nbytes, ridge = recorded_inputs(record, reference, course)
    require_course_size(
        reference.num_params(cfg),
        reference.num_params(reference.COURSE_MODEL),
        f"metrics.json['{RECORD}']",
    )
    require_reproduced(student, record, f"metrics.json['{RECORD}']")
    require_general(student, reference, probe)
    return record, cfg, context_len, nbytes, ridge


def m9_entry(metrics: dict) -> dict:
    record = metrics.get(RECORD)
    if not isinstance(record, dict):
        pytest.fail(
            f"metrics.json has no object under '{RECORD}' (keys: {sorted(metrics)}); run "
            "the notebook's last cell (m9_record + save_metric) and commit metrics.json",
            pytrace=False,
        )
    return record


def recorded_inputs(record: dict, reference, course) -> tuple[dict, int, int, float]:
    """The config, context and dtype the record claims, checked; the grader's ridge for its GPU."""
    for key in ("model", "context_len", "dtype_bytes", "gpu"):
        if key not in record:
            pytest.fail(
                f"metrics.json['{RECORD}'] lacks '{key}', so the grader cannot recompute "
                "it; write the record with m9_record(...)",
                pytrace=False,
            )
    cfg, context_len, nbytes, gpu = (
        record[k] for k in ("model", "context_len", "dtype_bytes", "gpu")
    )
    try:
        reference.validate_config(cfg)
    except (ValueError, TypeError) as exc:
        pytest.fail(
            f"metrics.json['{RECORD}']['model'] is not a valid model config: {exc}", pytrace=False
        )
    if type(context_len) is not int or context_len < 0:
        pytest.fail(
            f"metrics.json['{RECORD}']['context_len'] must be an int >= 0, got {context_len!r}",
            pytrace=False,
        )
    if type(nbytes) not in (int, float) or not (math.isfinite(nbytes) and nbytes > 0):
        pytest.fail(
            f"metrics.json['{RECORD}']['dtype_bytes'] must be a positive number, got {nbytes!r}",
            pytrace=False,
        )
    hw = course.hardware[course.course_gpu]
    name = gpu.get("name") if isinstance(gpu, dict) else None
    if name not in (course.course_gpu, hw.name):
        pytest.fail(
            f"metrics.json['{RECORD}']['gpu'] must be the course GPU "
            f"'{course.course_gpu}' (load_hardware()['{course.course_gpu}']), got "
            f"{name!r}",
            pytrace=False,
        )
    return cfg, context_len, nbytes, hw.peak_flops / hw.peak_bandwidth


@pytest.mark.points(1)
@PROBES
@given(probe=probes())
def test_metrics_records_course_gpu_and_valid_inputs(metrics, reference, course, student, probe):
    record, *_ = checked_record(metrics, reference, course, student, probe)
    hw = course.hardware[course.course_gpu]
    gpu = record["gpu"]
    for key, want in (("peak_flops", hw.peak_flops), ("peak_bandwidth", hw.peak_bandwidth)):
        got = gpu.get(key)
        assert isinstance(got, (int, float)) and math.isclose(got, want, rel_tol=1e-9), (
            f"metrics.json['{RECORD}']['gpu']['{key}'] is {got!r}; course.toml gives the "
            f"{course.course_gpu} {want:.4g} (in SI units: FLOP/s and byte/s). Read the figures "
            "with load_hardware() instead of typing them"
        )


@pytest.mark.points(3)
@pytest.mark.parametrize("key", ["params", *INTENSITY_KEYS, "crossover_batch"])
@PROBES
@given(probe=probes())
def test_metrics_recomputed(metrics, reference, course, key, student, probe):
    record, cfg, context_len, nbytes, ridge = checked_record(
        metrics, reference, course, student, probe
    )
    if key == "params":
        want = reference.num_params(cfg)
    elif key == "crossover_batch":
        want = reference.crossover_batch(cfg, ridge, context_len, nbytes)
    else:
        batch = int(key.removeprefix("intensity_b"))
        want = reference.decode_intensity(cfg, batch, context_len, nbytes)
    assert key in record, f"metrics.json['{RECORD}'] has no '{key}' (expected {want!r})"
    got = record[key]
    setting = (
        f"recomputed from the recorded model ({cfg.get('name', 'unnamed')}), "
        f"context_len={context_len} and dtype_bytes={nbytes} on the {course.course_gpu} "
        f"(ridge {ridge:.4g} FLOP/byte)"
    )
    if key == "crossover_batch":
        ok = crossover_matches(reference, got, want, cfg, ridge, context_len, nbytes)
        assert ok, (
            f"metrics.json['{RECORD}']['crossover_batch'] is {got!r}; {setting} it is {want!r}"
            + (" (None: no batch reaches the ridge at this context)" if want is None else "")
        )
        return
    ok = (
        type(got) is not bool
        and isinstance(got, (int, float))
        and math.isfinite(got)
        and math.isclose(got, want, rel_tol=1e-9)
    )
    if key == "params":
        ok = ok and type(got) is int
    off = (
        f" (off by {got - want:+.6g}, {100 * (got - want) / want:+.3g}%)"
        if isinstance(got, (int, float)) and not isinstance(got, bool)
        else ""
    )
    assert ok, f"metrics.json['{RECORD}']['{key}'] is {got!r}; {setting} it is {want!r}{off}"


# The conclusion rule, transcribed here from the notebook's text (never imported from it).
CLAIM = re.compile(r"\b(?:bandwidth|memory)[- ](?:bound|limited)\b")
NEGATED = re.compile(r"(?:\bnot|\bnever|\bno longer|n't)\W+(?:\w+\W+){0,2}$")


def claims_bandwidth_bound(text: str) -> bool:
    low = text.lower()
    found = list(CLAIM.finditer(low))
    return bool(found) and all(not NEGATED.search(low[: m.start()]) for m in found)


@pytest.mark.points(1)
@PROBES
@given(probe=probes())
def test_metrics_conclusion(metrics, reference, course, student, probe):
    record, cfg, context_len, nbytes, ridge = checked_record(
        metrics, reference, course, student, probe
    )
    conclusion = record.get("conclusion")
    # grader: public
    assert isinstance(conclusion, str) and conclusion.strip() and "\n" not in conclusion, (
        f"metrics.json['{RECORD}']['conclusion'] must be one non-empty line, got {conclusion!r}"
    )
    if reference.decode_intensity(cfg, 1, context_len, nbytes) < ridge:
        assert claims_bandwidth_bound(conclusion), (
            f"the conclusion {conclusion!r} does not call batch-1 decode bandwidth-bound, which "
            'is what the numbers show: say "bandwidth-bound" or "memory-bound" (or '
            '"-limited"), with no "not", "never", "no longer" or "n\'t" in the '
            "three words before it"
        )


@pytest.mark.points(2)
def test_save_metric_keeps_other_keys(student, tmp_path, monkeypatch):
    # A bare relative name: it resolves in the student process's working directory (here the
    # test's temp dir); the file is read back as data, never executed.
    monkeypatch.chdir(tmp_path)
    name = f"scratch-metrics-{uuid.uuid4().hex[:8]}.json"
    first = {"loss": 2.5, "steps": [1, 2, 3]}
    record = {"crossover_batch": None, "intensity_b1": 0.83, "conclusion": "bandwidth-bound"}
    before = set(student.list_dir("."))
    student.save_metric(name, "m1", first)
    student.save_metric(name, RECORD, record)
    student.save_metric(name, "m1", 3)  # overwrite one key; the other must survive
    # Read back through the student process: in the sandbox its working directory is its own.
    text = student.read_file(name)
    assert text is not None, (
        f"save_metric({name!r}, ...) did not create {name} relative to the working directory; "
        "write to exactly the path you are given"
    )
    try:
        data = json.loads(text)
    except ValueError as exc:  # grader: public
        pytest.fail(f"after three save_metric calls the file is not valid JSON ({exc})")
    want = {"m1": 3, RECORD: record}
    assert data == want, (
        f"after save_metric(p, 'm1', ...), save_metric(p, '{RECORD}', ...), save_metric(p, 'm1', "
        f"3) the file holds {data!r}; expected {want!r}. Read the existing object, set one key, "
        "write everything back: never drop the other keys"
    )
    leftovers = sorted(set(student.list_dir(".")) - before - {name})
    assert not leftovers, f"save_metric left temporary files behind: {leftovers}"
