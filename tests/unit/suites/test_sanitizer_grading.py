"""compute-sanitizer's findings in a grading: a launch with a finding earns no correctness points
although its output is right, and the feedback is the finding, in the student's own lines.

A `vector_add` whose thread t writes element i-1 from what thread t-1 staged in shared memory,
with no barrier, computes the right sum in the simulator (thread t-1 ran first) and on no GPU
that it can count on. Graded in this process with the real hidden suite (`select`), every one of
its tests fails with racecheck's finding: the line of the read in the student's file, the shared
array's variable, the element and the two threads.
"""

from __future__ import annotations

import pytest
from factories import GF_SOLUTION, ROOT
from memory_kernels import Variant, with_variant

from grader.suites.runner import run_assignment

RACY_VECTOR_ADD = Variant(
    "vector_add reading a neighbour's staged value without a barrier",
    "vector_add",
    """\
    stage = cuda.shared.array(1024, numba.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < c.size:
        stage[t] = a[i]
        if t > 0:
            c[i - 1] = stage[t - 1] + b[i - 1]
        if t == cuda.blockDim.x - 1 or i == c.size - 1:
            c[i] = a[i] + b[i]
""",
)


@pytest.mark.slow
def test_a_race_hidden_by_the_thread_order_costs_the_points_and_says_why(tmp_path):
    folder = tmp_path / "submission"
    (folder / "gpu_fundamentals").mkdir(parents=True)
    text = with_variant(RACY_VECTOR_ADD, GF_SOLUTION.read_text(encoding="utf-8"))
    (folder / "gpu_fundamentals" / "gpu_fundamentals.py").write_text(text)
    read_line = text.splitlines().index("            c[i - 1] = stage[t - 1] + b[i - 1]") + 1
    res = run_assignment(
        ROOT,
        "gpu_fundamentals",
        folder,
        metrics=folder / "none.json",
        identity="s",
        select="vector_add",
    )
    assert res.error is None and res.tests, res.error
    counted = [t for t in res.tests if t.outcome != "skipped"]
    # the invalid inputs launch nothing; [tiny] draws 1 to 8 elements (the draw follows the
    # suite's digest), and with one element one thread runs and nothing races
    launching = [t for t in counted if "invalid_input" not in t.name and "[tiny]" not in t.name]
    assert launching and all(t.outcome != "passed" for t in launching), [
        (t.name, t.outcome) for t in counted
    ]
    feedback = launching[0].feedback
    print("\n" + feedback)
    assert f"line {read_line} of gpu_fundamentals.py reads shared array `stage` element [" in (
        feedback
    )
    assert "which thread (0, 0, 0) of the same block wrote at line" in feedback
    assert "no barrier between them: a read-after-write race" in feedback
    assert "earns no correctness points" in feedback
