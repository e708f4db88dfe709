"""The mutation check for M10 (serving at scale): tests/unit/suites/test_mutants.py's pattern.

Every graded function of m10_serving, each with the wrong answers a student plausibly gives, must
lose points on all five seeds, graded in this process with only the tests of that function
(`select`). The kernel mutants that compute the right scores the wrong way (one thread per
position looping over the head dim) are graded by the memory tests alone: they lose exactly those
points. A file of its own, so that `make test`'s `--dist loadfile` runs it beside M9's.
`python -m pytest -s` prints the table (mutant, points lost per seed).
"""

from __future__ import annotations

import pytest
from factories import ROOT
from test_mutants import SEEDS, Mutant, graded, mutate, write

M10 = "m10_serving"

MUTANTS = (
    Mutant(
        "sectors_per_request: runs ignored (the ideal for every layout)",
        M10,
        "sectors_per_request",
        "runs_per_warp = max(1, 32 // run)",
        "runs_per_warp = 1",
    ),
    Mutant(
        "sectors_per_request: a run's bytes not capped at the warp's",
        M10,
        "sectors_per_request",
        "per_run = -(-min(run, 32) * itemsize // 32)",
        "per_run = -(-run * itemsize // 32)",
    ),
    Mutant(
        "scores_bhsd: one thread per position looping over d (right scores, 8-32 sectors)",
        M10,
        "bhsd_reads",
        "    s = e // dim\n    d = e % dim\n    if s < seq:\n"
        "        cuda.atomic.add(scores, (b, h, s), q[b, h, d] * k[b, h, s, d])",
        "    s = e\n    if s < seq:\n        for d in range(dim):\n"
        "            cuda.atomic.add(scores, (b, h, s), q[b, h, d] * k[b, h, s, d])",
    ),
    Mutant(
        "scores_bshd: one thread per position looping over d",
        M10,
        "bshd_reads",
        "    s = e // dim\n    d = e % dim\n    if s < seq:\n"
        "        cuda.atomic.add(scores, (b, h, s), q[b, h, d] * k[b, s, h, d])",
        "    s = e\n    if s < seq:\n        for d in range(dim):\n"
        "            cuda.atomic.add(scores, (b, h, s), q[b, h, d] * k[b, s, h, d])",
    ),
    Mutant(
        "scores_bshd: keys read as if (batch, head, seq, dim)",
        M10,
        "layouts_random and bshd",
        "q[b, h, d] * k[b, s, h, d])",
        "q[b, h, d] * k[b, (h * seq + s) // heads, (h * seq + s) % heads, d])",
    ),
    Mutant(
        "scores_paged: the block table ignored (pages taken in order)",
        M10,
        "test_scores_paged_random",
        "page = block_table[b, s // page_size]",
        "page = b * block_table.shape[1] + s // page_size",
    ),
    Mutant(
        "scores_paged: one thread per position looping over d",
        M10,
        "paged_reads",
        "    s = e // dim\n    d = e % dim\n    if s < seq:\n"
        "        page = block_table[b, s // page_size]\n"
        "        cuda.atomic.add(scores, (b, h, s), q[b, h, d] * "
        "k_pages[page, h, s % page_size, d])",
        "    s = e\n    if s < seq:\n"
        "        page = block_table[b, s // page_size]\n"
        "        for d in range(dim):\n"
        "            cuda.atomic.add(\n"
        "                scores, (b, h, s), q[b, h, d] * k_pages[page, h, s % page_size, d]\n"
        "            )",
    ),
    Mutant(
        "kv_blocks: floor",
        M10,
        "kv_blocks",
        "return -(-tokens // block_size)",
        "return tokens // block_size",
    ),
    Mutant(
        "admit: the prompt alone reserved",
        M10,
        "admit",
        "return bool(kv_blocks(prompt_tokens + expected, block_size) <= free_blocks)",
        "return bool(kv_blocks(prompt_tokens, block_size) <= free_blocks)",
    ),
    Mutant(
        "admit: prompt and output rounded apart",
        M10,
        "admit",
        "return bool(kv_blocks(prompt_tokens + expected, block_size) <= free_blocks)",
        "return bool(kv_blocks(prompt_tokens, block_size) + kv_blocks(expected, block_size)"
        " <= free_blocks)",
    ),
    Mutant(
        "admit: < for <= (exactly enough blocks refused)",
        M10,
        "admit",
        "return bool(kv_blocks(prompt_tokens + expected, block_size) <= free_blocks)",
        "return bool(kv_blocks(prompt_tokens + expected, block_size) < free_blocks)",
    ),
    Mutant(
        "prefix_cache_savings: the partial block shared too",
        M10,
        "prefix_cache",
        "full = prefix_tokens // block_size",
        "full = -(-prefix_tokens // block_size)",
    ),
    Mutant(
        "prefix_cache_savings: the first request saves too",
        M10,
        "prefix_cache",
        "others = requests - 1",
        "others = requests",
    ),
    Mutant(
        "preemption: a one-way swap",
        M10,
        "preemption",
        "swap = 2 * tokens * per_token / link",
        "swap = tokens * per_token / link",
    ),
    Mutant(
        "preemption: a tie goes to swap",
        M10,
        "preemption",
        'return ("swap", swap) if swap < recompute else ("recompute", recompute)',
        'return ("swap", swap) if swap <= recompute else ("recompute", recompute)',
    ),
    Mutant(
        "min_tp_degree: the whole card, not the usable budget",
        M10,
        "min_tp",
        "        if total / n <= budget:",
        "        if total / n <= memory_bytes:",
    ),
    Mutant(
        "min_tp_degree: the KV cache left out",
        M10,
        "min_tp",
        '    total = _positive("weight_bytes", weight_bytes) + _non_negative("kv_bytes", kv_bytes)'
        "\n    budget",
        '    total = _positive("weight_bytes", weight_bytes)\n    budget',
    ),
    Mutant(
        "allreduce_s: the ring's factor 2 dropped",
        M10,
        "allreduce_s",
        "return 2 * (n - 1) / n * size / link + 2 * (n - 1) * latency",
        "return (n - 1) / n * size / link + 2 * (n - 1) * latency",
    ),
    Mutant(
        "allreduce_s: one latency, not one a ring step",
        M10,
        "allreduce_s",
        "return 2 * (n - 1) / n * size / link + 2 * (n - 1) * latency",
        "return 2 * (n - 1) / n * size / link + latency",
    ),
    Mutant(
        "tp_tpot: one all-reduce a layer",
        M10,
        "tp_tpot",
        "return read + 2 * n_layers * allreduce_s(",
        "return read + n_layers * allreduce_s(",
    ),
    Mutant(
        "tp_tpot: every GPU reads all the bytes",
        M10,
        "tp_tpot",
        'read = total / _count("n", n, 1) / (',
        'read = total / _count("n", n, 1) ** 0 / (',
    ),
    Mutant(
        "allreduce_exposed_batch: latency forgotten",
        M10,
        "exposed",
        "fixed = 2 * n_layers * 2 * (n - 1) * latency",
        "fixed = 0.0",
    ),
    Mutant(
        "allreduce_exposed_batch: one all-reduce a layer",
        M10,
        "exposed",
        "per_sequence = 2 * n_layers * 2 * (n - 1) / n * hidden * act_bytes / link",
        "per_sequence = n_layers * 2 * (n - 1) / n * hidden * act_bytes / link",
    ),
    Mutant(
        "moe_params: shared weights left out of the active count",
        M10,
        "moe_params",
        "return shared + n_experts * expert, shared + top_k * expert",
        "return shared + n_experts * expert, top_k * expert",
    ),
    Mutant(
        "experts_touched: batch x top_k, capped (no overlap between tokens)",
        M10,
        "experts_touched",
        "return n_experts * (1 - (1 - top_k / n_experts) ** batch)",
        "return float(min(n_experts, top_k * batch))",
    ),
    Mutant(
        "moe_crossover_batch: only the active experts' bytes read",
        M10,
        "moe_crossover",
        "read = shared_params + experts_touched(n_experts, top_k, batch) * expert_params",
        "read = shared_params + top_k * expert_params",
    ),
    Mutant(
        "moe_crossover_batch: every expert's bytes read at every batch",
        M10,
        "moe_crossover",
        "read = shared_params + experts_touched(n_experts, top_k, batch) * expert_params",
        "read = shared_params + n_experts * expert_params",
    ),
    Mutant(
        "expected_tokens: (1 - a^k) / (1 - a), the bonus token forgotten",
        M10,
        "expected_tokens",
        "return (1 - a ** (k + 1)) / (1 - a)",
        "return (1 - a ** k) / (1 - a)",
    ),
    Mutant(
        "expected_tokens: k + 1 whatever the acceptance",
        M10,
        "expected_tokens",
        "    if a == 1:\n        return float(k + 1)",
        "    if True:\n        return float(k + 1)",
    ),
    Mutant(
        "spec_speedup: the draft is free",
        M10,
        "spec_speedup",
        "return expected_tokens(acceptance, k) / (1 + k * cost)",
        "return expected_tokens(acceptance, k)",
    ),
    Mutant(
        "best_draft_length: a tie goes to the longer draft",
        M10,
        "best_draft",
        "        if speedup > best_speedup:",
        "        if speedup >= best_speedup:",
    ),
    Mutant(
        "best_draft_length: k_max itself never tried",
        M10,
        "best_draft",
        "for k in range(1, k_max + 1):",
        "for k in range(1, k_max):",
    ),
    Mutant(
        "decode_tpot: the batch's feedback left out (TPOT at the batch of base_s alone)",
        M10,
        "decode_tpot",
        "return base / left if left > 0 else math.inf",
        "return base + per_seq * rate * output_tokens * base",
    ),
    Mutant(
        "arrival_times: the rate taken as the mean gap",
        M10,
        "arrival_times",
        "gaps = np.random.default_rng(seed).exponential(1.0 / rate, size=n)",
        "gaps = np.random.default_rng(seed).exponential(rate, size=n)",
    ),
    Mutant(
        "ttfts: the queue left out (TTFT = prefill)",
        M10,
        "ttfts",
        "start = max(arrival, free_at)",
        "start = arrival",
    ),
    Mutant(
        "p99: the floor rank",
        M10,
        "p99",
        "return ordered[-(-99 * len(ordered) // 100) - 1]",
        "return ordered[max(0, 99 * len(ordered) // 100 - 1)]",
    ),
    Mutant(
        "goodput: the TPOT target ignored",
        M10,
        "goodput",
        "if tpot <= tpot_slo and (not waits or p99(waits) <= ttft_slo):",
        "if not waits or p99(waits) <= ttft_slo:",
    ),
    Mutant(
        "goodput: the mean TTFT, not the p99",
        M10,
        "goodput",
        "if tpot <= tpot_slo and (not waits or p99(waits) <= ttft_slo):",
        "if tpot <= tpot_slo and (not waits or sum(waits) / len(waits) <= ttft_slo):",
    ),
)


TABLE: list[str] = []


@pytest.mark.slow
@pytest.mark.parametrize("m", MUTANTS, ids=[m.name for m in MUTANTS])
def test_m10_mutant_loses_points_on_every_seed(m, tmp_path):
    reference = (ROOT / "solutions" / M10 / f"{M10}.py").read_text()
    ref_score, ref_max = graded(write(tmp_path / "ref", M10, reference), m, SEEDS[0])
    assert ref_max > 0 and ref_score == pytest.approx(ref_max), "the reference lost points"
    folder = write(tmp_path / "mutant", M10, mutate(reference, m))
    lost = []
    for identity in SEEDS:
        score, most = graded(folder, m, identity)
        lost.append(round(most - score, 3))
    TABLE.append(f"{m.name:<75} {' '.join(f'{x:5g}' for x in lost)}  (of {ref_max:g})")
    print("\n" + TABLE[-1])
    assert all(x > 0 for x in lost), f"{m.name} kept full marks on some seed: lost {lost}"
