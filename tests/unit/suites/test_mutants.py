"""The mutation check: plausible wrong solutions must lose points on every seed tried.

Each mutant swaps one line of one graded function of the reference solution for a mistake a
student makes. Graded in this process (the in-process backend, the real suites) with only the
tests that exercise that function (`run_assignment(select=...)`), under five identities, i.e.
five per-student seeds: each seed must cost the mutant points. A mutant that keeps full marks on
some seed is a hole in the suites' draws (add an `@example`), not bad luck.

Occupancy and divergence belong to the gpu_fundamentals rewrite and the serving functions added
with it to the m9 one; these cover the functions that existed before, and every function of
M9's serving-engine sections (MBU, continuous batching, chunked prefill, decode attention,
split-KV), with the capacity budget and the prefill head rule. `python -m pytest -s`
prints the table (mutant, points lost per seed).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from factories import ROOT

from grader.suites.runner import run_assignment

M9, GF = "m9_roofline", "gpu_fundamentals"
SEEDS = tuple(f"mutation-seed-{k}" for k in range(1, 6))


@dataclass(frozen=True)
class Mutant:
    name: str
    assignment: str
    select: str  # pytest -k: the tests of the mutated function
    old: str  # one line of the reference, found exactly once
    new: str


MUTANTS = (
    Mutant(
        "num_params: output head counted even when tied",
        M9,
        "num_params",
        'head = 0 if cfg["tied_embeddings"] else cfg["vocab_size"] * dim',
        'head = cfg["vocab_size"] * dim',
    ),
    Mutant(
        "num_params: final RMSNorm left out",
        M9,
        "num_params",
        'return int(embedding + head + cfg["n_layers"] * per_layer + dim)',
        'return int(embedding + head + cfg["n_layers"] * per_layer)',
    ),
    Mutant(
        "num_params: wk/wv sized with query heads",
        M9,
        "num_params",
        "attention = 2 * dim * dim + 2 * dim * kv_dim",
        "attention = 4 * dim * dim",
    ),
    Mutant(
        "kv_bytes_per_token: query heads cached (no GQA)",
        M9,
        "kv_bytes",
        'return 2 * cfg["n_layers"] * cfg["n_kv_heads"] * head_dim * dtype_bytes',
        'return 2 * cfg["n_layers"] * cfg["n_heads"] * head_dim * dtype_bytes',
    ),
    Mutant(
        "kv_bytes_per_token: K only (factor 2 dropped)",
        M9,
        "kv_bytes",
        'return 2 * cfg["n_layers"] * cfg["n_kv_heads"] * head_dim * dtype_bytes',
        'return cfg["n_layers"] * cfg["n_kv_heads"] * head_dim * dtype_bytes',
    ),
    Mutant(
        "decode_intensity: KV-cache traffic left out",
        M9,
        "decode_intensity",
        "traffic = params * dtype_bytes + batch * context_len * kv",
        "traffic = params * dtype_bytes",
    ),
    Mutant(
        "crossover_batch: closed form on a parameter count without the final norm",
        M9,
        "crossover_batch and not metrics",
        "    params = matmul_params(cfg)\n    r = Fraction(float(ridge))",
        '    params = matmul_params(cfg) - cfg["dim"]\n    r = Fraction(float(ridge))\n'
        "    return max(1, math.ceil(r * params * dtype_bytes / (2 * params - r * context_len * kv)"
        ")) if 2 * params > r * context_len * kv else None",
    ),
    Mutant(
        "decode_tokens_per_s_bound: per sequence, not per batch",
        M9,
        "tokens_per_s",
        "return float(batch / step_s)",
        "return float(1 / step_s)",
    ),
    Mutant(
        "kv_cache_fits: < for <= (exactly full does not fit)",
        M9,
        "kv_cache_fits",
        "return bool(needed <= budget)",
        "return bool(needed < budget)",
    ),
    Mutant(
        "kv_cache_fits: KV cache left out",
        M9,
        "kv_cache_fits",
        "needed = num_params(cfg) * Fraction(dtype_bytes) + batch * context_len * Fraction(kv)",
        "needed = num_params(cfg) * Fraction(dtype_bytes)",
    ),
    Mutant(
        "kv_cache_fits: the whole card, not the usable budget",
        M9,
        "kv_cache_fits",
        '    budget = Fraction(gpu["usable_memory_fraction"]) * Fraction(gpu["memory_bytes"])\n'
        "    return bool(needed <= budget)",
        '    budget = Fraction(gpu["memory_bytes"])\n    return bool(needed <= budget)',
    ),
    Mutant(
        "max_batch_that_fits: the whole card, not the usable budget",
        M9,
        "max_batch_that_fits",
        '    budget = Fraction(gpu["usable_memory_fraction"]) * Fraction(gpu["memory_bytes"])\n'
        "    room = budget",
        '    budget = Fraction(gpu["memory_bytes"])\n    room = budget',
    ),
    Mutant(
        "kv_bytes_per_token: an int even for a fractional size",
        M9,
        "kv_bytes",
        'return 2 * cfg["n_layers"] * cfg["n_kv_heads"] * head_dim * dtype_bytes',
        'return int(2 * cfg["n_layers"] * cfg["n_kv_heads"] * head_dim * dtype_bytes)',
    ),
    Mutant(
        "decode_step_breakdown: kv_dtype_bytes=None read as 2 bytes",
        M9,
        "decode_step_breakdown",
        "        dtype_bytes if kv_dtype_bytes is None else check_bytes(kv_dtype_bytes, "
        '"kv_dtype_bytes")\n    )\n    params = matmul_params(cfg)  # validates cfg\n    per_token',
        '        2 if kv_dtype_bytes is None else check_bytes(kv_dtype_bytes, "kv_dtype_bytes")'
        "\n    )\n    params = matmul_params(cfg)  # validates cfg\n    per_token",
    ),
    Mutant(
        "prefill_time: the output head scores every prompt token",
        M9,
        "prefill_time",
        "weights = roofline_kernel(2 * batch * (n * (params - head) + head), params * dtype_bytes",
        "weights = roofline_kernel(2 * params * batch * n, params * dtype_bytes",
    ),
    Mutant(
        "decode_utilization: MFU without attention's FLOPs",
        M9,
        "decode_utilization",
        'flops = step["weights"]["flops"] + step["attention"]["flops"]',
        'flops = step["weights"]["flops"]',
    ),
    Mutant(
        "decode_utilization: MBU counts the untied input table as read",
        M9,
        "decode_utilization",
        'nbytes = step["weights"]["bytes"] + step["attention"]["bytes"]',
        'nbytes = num_params(cfg) * dtype_bytes + step["attention"]["bytes"]',
    ),
    Mutant(
        "decode_utilization: percentages, not fractions",
        M9,
        "decode_utilization",
        '"mbu": float(nbytes / (tpot_s * gpu["peak_bandwidth"])),',
        '"mbu": float(100 * nbytes / (tpot_s * gpu["peak_bandwidth"])),',
    ),
    Mutant(
        "ragged_decode_step: padded to the longest context (static batching)",
        M9,
        "ragged",
        '    total = sum(check_int(c, f"context_lens[{i}]", 1) for i, c in '
        "enumerate(context_lens))",
        '    total = sum(check_int(c, f"context_lens[{i}]", 1) for i, c in '
        "enumerate(context_lens))\n    total = max(context_lens) * len(context_lens)",
    ),
    Mutant(
        "ragged_decode_step: a mean context rounded down",
        M9,
        "ragged",
        '    total = sum(check_int(c, f"context_lens[{i}]", 1) for i, c in '
        "enumerate(context_lens))",
        '    total = sum(check_int(c, f"context_lens[{i}]", 1) for i, c in '
        "enumerate(context_lens))\n    total = total // len(context_lens) * len(context_lens)",
    ),
    Mutant(
        "ragged_decode_step: the weights read once per sequence",
        M9,
        "ragged",
        "weights = roofline_kernel(2 * params * len(context_lens), params * dtype_bytes, gpu)",
        "weights = roofline_kernel(2 * params * len(context_lens), params * dtype_bytes * "
        "len(context_lens), gpu)",
    ),
    Mutant(
        "max_batch_under_tpot: the memory wall forgotten",
        M9,
        "max_batch_under_tpot",
        "    wall = max_batch_that_fits(cfg, gpu, context_len, dtype_bytes, kv_dtype_bytes)\n"
        "    if wall < 1",
        "    wall = 10**7\n    if wall < 1",
    ),
    Mutant(
        "max_batch_under_tpot: the one-blob bound, not the kernels' times summed",
        M9,
        "max_batch_under_tpot",
        '        return step["time_s"] <= tpot_s',
        "        rate = decode_tokens_per_s_bound(cfg, gpu, b, context_len, dtype_bytes, "
        "kv_dtype_bytes)\n        return b / rate <= tpot_s",
    ),
    Mutant(
        "max_batch_under_tpot: the first batch that misses",
        M9,
        "max_batch_under_tpot",
        "    return int(low)",
        "    return int(low) + 1 if low < wall else int(low)",
    ),
    Mutant(
        "chunked_prefill_budget: at the ridge counted as memory-bound",
        M9,
        "chunked",
        "most_tokens = math.ceil(ridge * Fraction(dtype_bytes) / 2) - 1",
        "most_tokens = math.floor(ridge * Fraction(dtype_bytes) / 2)",
    ),
    Mutant(
        "chunked_prefill_budget: the decode batch's own tokens forgotten",
        M9,
        "chunked",
        "return int(max(0, most_tokens - batch))",
        "return int(max(0, most_tokens))",
    ),
    Mutant(
        "chunked_prefill_budget: negative past the ridge",
        M9,
        "chunked",
        "return int(max(0, most_tokens - batch))",
        "return int(most_tokens - batch)",
    ),
    Mutant(
        "chunked_prefill_budget: ridge x bytes, the factor 2 of FLOPs per weight dropped",
        M9,
        "chunked",
        "most_tokens = math.ceil(ridge * Fraction(dtype_bytes) / 2) - 1",
        "most_tokens = math.ceil(ridge * Fraction(dtype_bytes)) - 1",
    ),
    Mutant(
        "decode_attention_intensity: the grouped-query ratio inverted",
        M9,
        "decode_attention_intensity",
        'return float(4 * cfg["n_layers"] * cfg["dim"] * spec_tokens / per_token)',
        'return float(2 * spec_tokens * cfg["n_kv_heads"] / cfg["n_heads"] / kv_dtype_bytes)',
    ),
    Mutant(
        "decode_attention_intensity: speculative tokens ignored",
        M9,
        "decode_attention_intensity",
        'return float(4 * cfg["n_layers"] * cfg["dim"] * spec_tokens / per_token)',
        'return float(4 * cfg["n_layers"] * cfg["dim"] / per_token)',
    ),
    Mutant(
        "decode_attention_intensity: the cache's size ignored (always 2 bytes)",
        M9,
        "decode_attention_intensity",
        'return float(4 * cfg["n_layers"] * cfg["dim"] * spec_tokens / per_token)',
        'return float(4 * cfg["n_layers"] * cfg["dim"] * spec_tokens / kv_bytes_per_token(cfg, 2))',
    ),
    Mutant(
        "split_kv_plan: a block per query head",
        M9,
        "split_kv",
        'blocks = batch * cfg["n_kv_heads"]',
        'blocks = batch * cfg["n_heads"]',
    ),
    Mutant(
        "split_kv_plan: no floor on a chunk's length",
        M9,
        "split_kv",
        "splits = min(to_cover, max(1, context_len // min_chunk))",
        "splits = to_cover",
    ),
    Mutant(
        "split_kv_plan: chunks afforded rounded up",
        M9,
        "split_kv",
        "splits = min(to_cover, max(1, context_len // min_chunk))",
        "splits = min(to_cover, max(1, -(-context_len // min_chunk)))",
    ),
    Mutant(
        "split_kv_plan: SMs over blocks rounded down",
        M9,
        "split_kv",
        'to_cover = -(-int(gpu["sm_count"]) // blocks)',
        'to_cover = max(1, int(gpu["sm_count"]) // blocks)',
    ),
    Mutant(
        "split_kv_plan: the chunk length rounded down",
        M9,
        "split_kv",
        '"chunk_len": -(-context_len // splits),',
        '"chunk_len": context_len // splits,',
    ),
    Mutant(
        "is_memory_bound: <= for < (at the ridge counts as memory-bound)",
        GF,
        "is_memory_bound",
        "return bool(value < ridge)",
        "return bool(value <= ridge)",
    ),
    Mutant(
        "launch_config: grid rounded down",
        GF,
        "launch_config",
        "blocks = (n + threads_per_block - 1) // threads_per_block",
        "blocks = max(1, n // threads_per_block)",
    ),
    Mutant(
        # Issue 24: right only at the sizes the kernel tests used to fix for everyone.
        "vector_add: right only at the sizes the suites once fixed",
        GF,
        "test_vector_add_float64 or (test_vector_add_sizes and (tiny or odd))",
        "    if i < c.size:  # grader: public\n        c[i] = a[i] + b[i]",
        "    n = c.size\n"
        "    if i < n and (n == 1 or n == 255 or n == 257 or n == 1000 or n == 4097 or n == 300):\n"
        "        c[i] = a[i] + b[i]",
    ),
    Mutant(
        "attainable_flops: no compute roof",
        GF,
        "attainable_flops",
        "result = np.minimum(values * bandwidth, flops)",
        "result = values * bandwidth",
    ),
)


def mutate(source: str, m: Mutant) -> str:
    assert source.count(m.old) == 1, f"{m.name}: the line to mutate is not in the reference"
    return source.replace(m.old, m.new)


def write(folder: Path, assignment: str, source: str) -> Path:
    (folder / assignment).mkdir(parents=True, exist_ok=True)
    (folder / assignment / f"{assignment}.py").write_text(source, encoding="utf-8")
    return folder


def graded(folder: Path, m: Mutant, identity: str) -> tuple[float, float]:
    res = run_assignment(
        ROOT,
        m.assignment,
        folder,
        metrics=folder / "none.json",
        identity=identity,
        select=m.select,
    )
    assert res.error is None and res.tests, res.error
    counted = [t for t in res.tests if t.outcome != "skipped"]
    return sum(t.score for t in counted), sum(t.max_score for t in counted)


TABLE: list[str] = []


@pytest.mark.slow
@pytest.mark.parametrize("m", MUTANTS, ids=[m.name for m in MUTANTS])
def test_mutant_loses_points_on_every_seed(m, tmp_path):
    reference = (ROOT / "solutions" / m.assignment / f"{m.assignment}.py").read_text()
    ref_score, ref_max = graded(write(tmp_path / "ref", m.assignment, reference), m, SEEDS[0])
    assert ref_max > 0 and ref_score == pytest.approx(ref_max), "the reference lost points"
    folder = write(tmp_path / "mutant", m.assignment, mutate(reference, m))
    lost = []
    for identity in SEEDS:
        score, most = graded(folder, m, identity)
        lost.append(round(most - score, 3))
    TABLE.append(f"{m.name:<75} {' '.join(f'{x:5g}' for x in lost)}  (of {ref_max:g})")
    print("\n" + TABLE[-1])
    assert all(x > 0 for x in lost), f"{m.name} kept full marks on some seed: lost {lost}"
