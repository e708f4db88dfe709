"""Corpus cases: the M9 record and the serving functions (issues 24, 26 and 27).

A metrics.json record earns its points only for a computation (the student's m9_record right on
drawn configs, not a lookup of the one it records) and for a model of at least the course
model's number of weights, measured fairly (no single dimension compared). Each obvious wrong
answer of the serving functions (issue 27's mutants) loses the points of the tests that hold it.

Imported by build.py after its own cases; uses build's helpers. The README table says which
check defeats each case.
"""

from __future__ import annotations

import json
from pathlib import Path

from build import BROKEN, M9, Case, Ctx, Expect, Rule, patch, write_fork

# The figures the reference records for the course model, typed in; anything else raises.
LOOKUP = '''
if cfg.get("dim") == 128 and cfg.get("vocab_size") == 4096 and context_len == 512:
    return dict(RECORD_TABLE)
raise ValueError("only the course model is in the table")
'''

# A model four times the course model's weights with half its vocabulary: wider, deeper.
BIG_SMALL_VOCAB = {
    "name": "wide-small-vocab",
    "dim": 256,
    "n_layers": 7,
    "n_heads": 8,
    "n_kv_heads": 2,
    "vocab_size": 2048,
    "ffn_hidden_dim": 768,
    "tied_embeddings": True,
}

EVERY_M9_STUDENT_TEST = r"^(public|hidden)/test_"
STUBBED = ("num_params", "matmul_params", "kv_bytes_per_token", "decode_intensity",
           "crossover_batch")


def _reference(ctx: Ctx):
    from grader.sandbox.harness import load_module

    return load_module(ctx.root / "solutions" / M9 / f"{M9}.py", "corpus_reference_m9_metrics")


def _lookup_table(dest: Path, ctx: Ctx) -> None:
    """The reference with the arithmetic stubbed and an m9_record that looks its answer up."""
    ref = _reference(ctx)
    record = ctx.metrics[M9]
    source = ctx.solutions[M9]
    for grade_id in STUBBED:
        source = patch(source, grade_id, 'raise NotImplementedError("not done yet")')
    table = f"RECORD_TABLE = json.loads({json.dumps(json.dumps(record))})\n"
    source = patch(source, "m9_record", LOOKUP)
    source = source.replace("def m9_record(", table + "\n\ndef m9_record(", 1)
    assert ref.num_params(record["model"]) == record["params"]
    write_fork(dest, {M9: source}, metrics={M9: record}, ctx=ctx)


def _big_model_small_vocab(dest: Path, ctx: Ctx) -> None:
    """The reference notebook and its own record for a 4x larger model with vocab 2048."""
    ref = _reference(ctx)
    assert ref.num_params(BIG_SMALL_VOCAB) >= 4 * ref.num_params(ref.COURSE_MODEL)
    gpu = ref.load_hardware(ctx.root / "course.toml")[ref.COURSE_GPU]
    record = json.loads(json.dumps(ref.m9_record(BIG_SMALL_VOCAB, gpu, 512)))
    write_fork(dest, {M9: ctx.solutions[M9]}, metrics={M9: record}, ctx=ctx)


def _negated_conclusion(dest: Path, ctx: Ctx) -> None:
    """The reference's record with the conclusion negated, m9_record saying the same."""
    bad = "At batch 1 decode is compute-bound, not memory-bound."
    source = ctx.solutions[M9].replace(
        '    return {\n        "intensity_b1": i1,', f"    conclusion = {bad!r}\n    return {{\n"
        '        "intensity_b1": i1,', 1
    )
    assert source != ctx.solutions[M9]
    record = dict(ctx.metrics[M9], conclusion=bad)
    write_fork(dest, {M9: source}, metrics={M9: record}, ctx=ctx)


def mutant(grade_id: str, body: str):
    """Builder: the reference with one solution region replaced by a plausible wrong answer."""

    def build(dest: Path, ctx: Ctx) -> None:
        write_fork(dest, {M9: patch(ctx.solutions[M9], grade_id, body)}, ctx=ctx)

    return build


# Prefill that forgets the KV cache it writes: attention is timed on its FLOPs alone.
PREFILL_NO_KV = '''
check_gpu(gpu, ("peak_flops", "peak_bandwidth"))
batch = check_int(batch, "batch", 1)
n = check_int(prompt_len, "prompt_len", 1)
dtype_bytes = check_bytes(dtype_bytes, "dtype_bytes")
params = matmul_params(cfg)
head = cfg["vocab_size"] * cfg["dim"]
weights = roofline_kernel(2 * batch * (n * (params - head) + head), params * dtype_bytes, gpu)
attention_s = batch * 2 * cfg["n_layers"] * cfg["dim"] * n * (n + 1) / gpu["peak_flops"]
return float(weights["time_s"] + attention_s)
'''

# The weights' precision used for the cache too.
BREAKDOWN_MIXED = '''
check_gpu(gpu, ("peak_flops", "peak_bandwidth"))
batch = check_int(batch, "batch", 1)
context_len = check_int(context_len, "context_len", 1)
dtype_bytes = check_bytes(dtype_bytes, "dtype_bytes")
params = matmul_params(cfg)
weights = roofline_kernel(2 * params * batch, params * dtype_bytes, gpu)
attention = roofline_kernel(
    4 * cfg["n_layers"] * cfg["dim"] * context_len * batch,
    batch * context_len * kv_bytes_per_token(cfg, 1) * dtype_bytes,
    gpu,
)
return {"weights": weights, "attention": attention,
        "time_s": float(weights["time_s"] + attention["time_s"])}
'''

# The bandwidth ceiling alone: the compute roof ignored.
TOKENS_BANDWIDTH_ONLY = '''
check_gpu(gpu, ("peak_flops", "peak_bandwidth"))
batch = check_int(batch, "batch", 1)
context_len = check_int(context_len, "context_len", 0)
dtype_bytes = check_bytes(dtype_bytes, "dtype_bytes")
kv = kv_bytes_per_token(cfg, dtype_bytes if kv_dtype_bytes is None else kv_dtype_bytes)
step_bytes = matmul_params(cfg) * dtype_bytes + batch * context_len * kv
return float(batch * gpu["peak_bandwidth"] / step_bytes)
'''

# The untied input table multiplied as if it were a matmul.
MATMUL_ALL = '''
return num_params(cfg)
'''

# The cache's precision ignored in the memory check.
FITS_ONE_PRECISION = '''
check_gpu(gpu, ("memory_bytes", "usable_memory_fraction"))
batch = check_int(batch, "batch", 1)
context_len = check_int(context_len, "context_len", 0)
dtype_bytes = check_bytes(dtype_bytes, "dtype_bytes")
needed = num_params(cfg) * dtype_bytes + batch * context_len * kv_bytes_per_token(cfg, dtype_bytes)
needed += Fraction(check_runtime_bytes(runtime_bytes))
return bool(needed <= Fraction(gpu["usable_memory_fraction"]) * Fraction(gpu["memory_bytes"]))
'''

# Memory counted from the multiplied weights only: the looked-up input table left out.
MAX_BATCH_MATMUL_ONLY = '''
check_gpu(gpu, ("memory_bytes", "usable_memory_fraction"))
context_len = check_int(context_len, "context_len", 1)
dtype_bytes = check_bytes(dtype_bytes, "dtype_bytes")
kv = dtype_bytes if kv_dtype_bytes is None else kv_dtype_bytes
per_sequence = context_len * Fraction(kv_bytes_per_token(cfg, kv))
budget = Fraction(gpu["usable_memory_fraction"]) * Fraction(gpu["memory_bytes"])
room = budget - matmul_params(cfg) * Fraction(dtype_bytes)
room -= Fraction(check_runtime_bytes(runtime_bytes))
return 0 if room < 0 else int(room // per_sequence)
'''

MAYBE = ("passed", "failed", "error")

CASES: list[Case] = [
    Case("metrics_lookup_table", "every function a stub except m9_record, which returns the "
         "course model's figures typed in and raises for anything else; metrics.json is the "
         "reference record",
         _lookup_table,
         Expect(M9, [Rule(r"hidden/test_metrics_", BROKEN, ("right in general",)),
                     Rule(r"public/test_metrics_", BROKEN, ("another GPU and context",)),
                     Rule(r"test_save_metric|\[save_metric\(|test_config_with_unknown|"
                          r"\[(m9_record|kv_cache_fits)\(|test_serving_invalid|"
                          # no stubbed arithmetic in these: chunked_prefill_budget takes no
                          # config, split_kv_plan only validates it
                          r"test_chunked_prefill_budget|test_split_kv_plan|"
                          r"test_batching_invalid", MAYBE, (), required=False),
                     Rule(EVERY_M9_STUDENT_TEST, BROKEN, ())])),
    Case("metrics_big_model_small_vocab", "a record of the student's own model: four times the "
         "course model's weights, half its vocabulary (every function correct)",
         _big_model_small_vocab, Expect(M9, [])),
    Case("conclusion_negated", "m9_record and the record say 'compute-bound, not memory-bound'",
         _negated_conclusion,
         Expect(M9, [Rule(r"hidden/test_metrics_conclusion", BROKEN,
                          ("does not call batch-1 decode bandwidth-bound",))])),
    Case("mutant_prefill_forgets_kv_cache", "prefill_time leaves out the KV cache it writes",
         mutant("prefill_time", PREFILL_NO_KV),
         Expect(M9, [Rule(r"test_prefill_time_random|test_prefill_and_ttft", BROKEN,
                          ("KV cache written", "cache")),
                     Rule(r"test_ttft_and_tpot_random", MAYBE, (), required=False)])),
    Case("mutant_breakdown_mixes_precisions", "decode_step_breakdown sizes the cache with the "
         "weights' bytes per number",
         mutant("decode_step_breakdown", BREAKDOWN_MIXED),
         Expect(M9, [Rule(r"test_decode_step_breakdown_random", BROKEN, ("kv_bytes",)),
                     # what calls decode_step_breakdown, and its dropped kv_dtype_bytes check
                     Rule(r"test_ttft_and_tpot_random|test_decode_utilization|"
                          r"test_max_batch_under_tpot|test_serving_invalid", MAYBE, (),
                          required=False)])),
    Case("mutant_tokens_per_s_ignores_compute", "decode_tokens_per_s_bound is the bandwidth "
         "ceiling alone", mutant("decode_tokens_per_s_bound", TOKENS_BANDWIDTH_ONLY),
         Expect(M9, [Rule(r"tokens_per_s_bound", BROKEN, ("compute roof", "peak_flops"))])),
    Case("mutant_decode_multiplies_input_table", "matmul_params returns num_params (the untied "
         "input embedding multiplied)", mutant("matmul_params", MATMUL_ALL),
         Expect(M9, [Rule(r"test_matmul_params|test_untied_input_table", BROKEN,
                          ("lookup", "looked up")),
                     Rule(r"test_(decode_intensity|crossover_batch|m9_record|metrics_|"
                          r"decode_tokens|decode_step|prefill|ttft|decode_utilization|"
                          r"ragged_decode_step|max_batch_under_tpot|continuous_batching)", MAYBE,
                          (), required=False)])),
    Case("mutant_fits_one_precision", "kv_cache_fits ignores kv_dtype_bytes",
         mutant("kv_cache_fits", FITS_ONE_PRECISION),
         Expect(M9, [Rule(r"test_kv_cache_fits_random", BROKEN, ("kv_dtype_bytes",))])),
    Case("mutant_max_batch_forgets_input_table", "max_batch_that_fits counts only the multiplied "
         "weights as resident", mutant("max_batch_that_fits", MAX_BATCH_MATMUL_ONLY),
         Expect(M9, [Rule(r"test_max_batch_that_fits_random", BROKEN, ("num_params",)),
                     # Llama-3-8B's wall (untied) in the public example, and what uses the wall
                     Rule(r"test_max_batch_that_fits_examples|test_max_batch_under_tpot|"
                          r"test_continuous_batching", MAYBE, (), required=False)])),
]
