"""Public tests for S5.2, milestone M9: your model's decode on the T4 roofline.

Run them with `pytest tests/public/m9_roofline` from the root of your repository, after the
notebook's last cell has written `metrics.json`. The grader also runs hidden tests with model
configs it draws at grading time, and recomputes your metrics.json record from the config it
records, so make every function correct in general, not only for the course model.

PYTEST_DONT_REWRITE: the assert messages are the student's feedback, so pytest's own
introspection is not appended to them.
"""

from __future__ import annotations

import pytest

from grader.suites.student import StudentError
from grader.suites.testing import (
    count_weights,
    expect_raises,
    expect_value_error,
    require_course_size,
    require_reproduced,
)

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
T4_RIDGE = 65e12 / 320e9  # 203.125 FLOP/byte
RECORD_KEYS = ("intensity_b1", "intensity_b8", "intensity_b32", "crossover_batch", "conclusion")


@pytest.mark.points(2)
def test_num_params_course_model(student, course_model):
    got = student.num_params(course_model)
    assert type(got) is int, f"num_params must return a Python int, got {got!r}"
    # embedding 4096*128 + 4 layers * (attention 49,152 + SwiGLU 147,456 + norms 256) + final norm
    want = 1_311_872
    assert got == want, (
        f"num_params(COURSE_MODEL) returned {got:,}; expected {want:,}: embedding 524,288 "
        "(tied, so no separate output head) + 4 layers x 196,864 + final RMSNorm 128. Per layer: "
        "wq, wo 128x128; wk, wv 128x64 (2 KV heads of 32 channels); w1, w3, w2 128x384; "
        "two RMSNorm gains of 128"
    )


@pytest.mark.points(1)
def test_kv_bytes_course_model(student, course_model):
    got = student.kv_bytes_per_token(course_model)
    assert type(got) is int, f"kv_bytes_per_token must return a Python int, got {got!r}"
    assert got == 1024, (
        f"kv_bytes_per_token(COURSE_MODEL) returned {got}; expected 1024 = 2 (K and V) x 4 "
        "layers x 2 KV heads x 32 channels x 2 bytes"
    )
    got4 = student.kv_bytes_per_token(course_model, dtype_bytes=4)
    assert got4 == 2048, f"with dtype_bytes=4 expected 2048 bytes, got {got4}"


@pytest.mark.points(1)
def test_decode_intensity_without_kv_cache(student, course_model):
    for batch in (1, 8):
        got = student.decode_intensity(course_model, batch, 0)
        assert isinstance(got, float), (
            f"decode_intensity must return a float, got {type(got).__name__}"
        )
        assert got == pytest.approx(float(batch), rel=1e-12), (
            f"decode_intensity(COURSE_MODEL, batch={batch}, context_len=0) returned {got}; with "
            f"no KV cache and 2-byte weights it is 2*params*batch / (2*params) = {batch}"
        )


@pytest.mark.points(2)
def test_crossover_batch_examples(student, course_model):
    got = student.crossover_batch(course_model, 100.0, 0)
    assert type(got) is int and got == 100, (
        f"crossover_batch(COURSE_MODEL, ridge=100.0, context_len=0) returned {got!r}; without a "
        "KV cache the fp16 intensity is exactly the batch, so the answer is the int 100"
    )
    long = student.crossover_batch(LLAMA3_8B, T4_RIDGE, 8192)
    assert long is None, (
        f"crossover_batch(LLAMA3_8B, {T4_RIDGE}, context_len=8192) returned {long!r}; at 8192 "
        "tokens the intensity never reaches the ridge (its limit 2*params / (context_len * KV "
        "bytes per token) is below it), so the honest answer is None"
    )


@pytest.mark.points(1)
def test_config_with_unknown_key_rejected(student, course_model):
    typo = {**course_model, "n_layer": 4}
    expect_value_error(
        lambda: student.num_params(typo),
        "num_params(config with 'n_layer')",
        "An unknown key (here a typo of n_layers) must be an error, not ignored",
    )


@pytest.mark.points(1)
def test_wrong_type_is_type_error(student, course_model):
    expect_raises(
        lambda: student.num_params({**course_model, "dim": 128.0}),
        TypeError,
        "num_params(config with dim=128.0)",
        "The notebook's convention: a value of the wrong type (a float where an int is required) "
        "raises TypeError; a value of the right type out of range raises ValueError",
    )
    expect_raises(
        lambda: student.decode_intensity(course_model, True, 16),
        TypeError,
        "decode_intensity(course model, batch=True, context_len=16)",
        "A bool is not an integer here: batch=True is a TypeError",
    )


@pytest.mark.points(1)
def test_untied_input_table_is_a_lookup(student):
    got = student.decode_intensity(LLAMA3_8B, 1, 512)
    multiplied = 7_504_924_672  # 8,030,261,248 weights less the 128,256 x 4096 input table
    want = 2 * multiplied / (2 * multiplied + 512 * 131_072)
    assert isinstance(got, float) and got == pytest.approx(want, rel=1e-9), (
        f"decode_intensity(LLAMA3_8B, 1, 512) returned {got!r}; expected {want:.6f}: an untied "
        "model's input embedding is a row lookup, so FLOPs and weight bytes count "
        "matmul_params = 7,504,924,672 weights, not all 8,030,261,248"
    )


@pytest.mark.points(2)
def test_metrics_json_has_m9_record(metrics, student, course_model):
    assert "m9_roofline" in metrics, (
        f"metrics.json has no 'm9_roofline' key (it has {sorted(metrics)}); run the notebook's "
        "last cell, which calls save_metric, and commit metrics.json"
    )
    record = metrics["m9_roofline"]
    assert isinstance(record, dict), "metrics.json['m9_roofline'] must be an object (a dict)"
    missing = [k for k in RECORD_KEYS if k not in record]
    assert not missing, f"metrics.json['m9_roofline'] is missing {missing}; use m9_record(...)"
    conclusion = record["conclusion"]
    assert isinstance(conclusion, str) and conclusion.strip() and "\n" not in conclusion, (
        f"the conclusion must be one non-empty line of text, got {conclusion!r}"
    )
    model = record.get("model")
    assert (
        isinstance(model, dict)
        and all(
            type(model.get(k)) is int and model[k] > 0
            for k in ("dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "ffn_hidden_dim")
        )
        and type(model.get("tied_embeddings")) is bool
        and model["dim"] % model["n_heads"] == 0
    ), f"metrics.json['m9_roofline']['model'] must be a valid model config, got {model!r}"
    # The same size rule as the hidden tests: at least the course model's number of weights.
    require_course_size(
        count_weights(model), count_weights(course_model), "metrics.json['m9_roofline']"
    )
    # The record earns points only when your own m9_record reproduces it from what it records.
    require_reproduced(student, record, "metrics.json['m9_roofline']")
    # ... and only when that m9_record computes: the course model on another GPU and context.
    other = {"name": "H100", "peak_flops": 989e12, "peak_bandwidth": 3350e9}
    try:
        probe = student.m9_record(course_model, other, 64)
        got = probe["intensity_b1"]
    except StudentError as exc:
        got = f"an error ({exc.exc_type}: {exc.message})"
    except (KeyError, TypeError):
        got = f"not a record ({type(probe).__name__})"
    want = 2 * 1_311_872 / (2 * 1_311_872 + 64 * 1024)
    assert isinstance(got, float) and got == pytest.approx(want, rel=1e-9), (
        "metrics.json['m9_roofline'] earns points only when your m9_record is right in general; "
        f"for the course model on another GPU and context (H100, context_len=64) its "
        f"intensity_b1 is {got!r}, expected {want!r}"
    )
