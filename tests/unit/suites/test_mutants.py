"""The mutation check: plausible wrong solutions must lose points on every seed tried.

Each mutant swaps one line of one graded function of the reference solution for a mistake a
student makes. Graded in this process (the in-process backend, the real suites) with only the
tests that exercise that function (`run_assignment(select=...)`), under five identities, i.e.
five per-student seeds: each seed must cost the mutant points. A mutant that keeps full marks on
some seed is a hole in the suites' draws (add an `@example`), not bad luck.

Occupancy and divergence belong to the gpu_fundamentals rewrite and the serving functions added
with it to the m9 one; these cover the functions that existed before. `python -m pytest -s`
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
        'return int(2 * cfg["n_layers"] * cfg["n_kv_heads"] * head_dim * dtype_bytes)',
        'return int(2 * cfg["n_layers"] * cfg["n_heads"] * head_dim * dtype_bytes)',
    ),
    Mutant(
        "kv_bytes_per_token: K only (factor 2 dropped)",
        M9,
        "kv_bytes",
        'return int(2 * cfg["n_layers"] * cfg["n_kv_heads"] * head_dim * dtype_bytes)',
        'return int(cfg["n_layers"] * cfg["n_kv_heads"] * head_dim * dtype_bytes)',
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
        'return bool(needed <= gpu["memory_bytes"])',
        'return bool(needed < gpu["memory_bytes"])',
    ),
    Mutant(
        "kv_cache_fits: KV cache left out",
        M9,
        "kv_cache_fits",
        "    needed = num_params(cfg) * dtype_bytes + batch * context_len * kv\n"
        '    return bool(needed <= gpu["memory_bytes"])',
        "    needed = num_params(cfg) * dtype_bytes\n"
        '    return bool(needed <= gpu["memory_bytes"])',
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
