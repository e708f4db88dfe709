"""The memory lessons, graded from the memory model: correct designs keep every point, fakes
lose exactly the lesson they skip.

Each kernel of `memory_kernels` (tests/corpus) replaces one kernel of the reference and is
graded in this process (the in-process backend, the real hidden suites) with the tests of that
kernel (`run_assignment(select=...)`). A correct design in another style (2-D blocks, a tile
stored transposed, padded matmul tiles, a grid-stride loop) keeps full marks; each fake computes
the right answer but must fail exactly its `loses` tests, and nothing else (its
correctness tests included). The table (`python -m pytest -s`) is the closing note's mutation
table. The same fakes are graded in the sandbox, as root and as an ordinary user, by the
hostile corpus (tests/corpus/cases_memory.py).
"""

from __future__ import annotations

import os

import pytest
from factories import GF_SOLUTION, ROOT
from memory_kernels import VARIANTS, Variant, with_variant

from grader.suites.runner import run_assignment

# The memory tests' shapes are fixed (only the values are drawn), so one seed grades them; the
# closing note's table used all three (GRADER_MEMORY_SEEDS=3 pytest -s this file)
SEEDS = ("memory-seed-1", "memory-seed-2", "memory-seed-3")[
    : int(os.environ.get("GRADER_MEMORY_SEEDS", "1"))
]
TABLE: list[str] = []


def graded(tmp_path, v: Variant, identity: str) -> tuple[set[str], float, float]:
    folder = tmp_path / "submission"
    (folder / "gpu_fundamentals").mkdir(parents=True, exist_ok=True)
    text = with_variant(v, GF_SOLUTION.read_text(encoding="utf-8"))
    (folder / "gpu_fundamentals" / "gpu_fundamentals.py").write_text(text)
    res = run_assignment(
        ROOT,
        "gpu_fundamentals",
        folder,
        metrics=folder / "none.json",
        identity=identity,
        select=v.kernel,
    )
    assert res.error is None and res.tests, res.error
    counted = [t for t in res.tests if t.outcome != "skipped"]
    failed = {t.name.split("/")[-1] for t in counted if t.outcome != "passed"}
    return failed, sum(t.max_score - t.score for t in counted), sum(t.max_score for t in counted)


@pytest.mark.slow
@pytest.mark.parametrize("v", VARIANTS, ids=[v.name for v in VARIANTS])
def test_correct_designs_keep_every_point_and_fakes_lose_only_their_lesson(v, tmp_path):
    seeds = SEEDS if v.loses else SEEDS[:1]
    lost = []
    for identity in seeds:
        failed, points_lost, most = graded(tmp_path, v, identity)
        assert failed == set(v.loses), (
            f"{v.name} ({identity}): failed {sorted(failed)}, expected {sorted(v.loses)}"
        )
        lost.append(points_lost)
    TABLE.append(f"{v.name:<50} lost {' '.join(f'{x:g}' for x in lost)} (of {most:g})")
    print("\n" + TABLE[-1])
    assert all(x > 0 for x in lost) if v.loses else lost == [0]
