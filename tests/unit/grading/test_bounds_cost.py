"""What each bounds case costs the trusted process, against the reference submission (issue 12).

Each case of tests/corpus/cases_bounds.py and the reference are graded, one at a time, each in a
fresh process (tests/corpus/measure.py): the trusted process's peak memory and CPU time must stay
within 2x of the reference's. Wall times are printed; they include the sandboxed worker's own
work (a worker that sent a refused reply is restarted), and are noisy on a shared machine.
"""

from __future__ import annotations

import json
import subprocess
import sys

import build  # noqa: F401  (first: it imports the families; tests/corpus, by pythonpath)
import cases_bounds
import pytest
from factories import ROOT

MEASURE = ROOT / "tests" / "corpus" / "measure.py"


def _measure(name: str) -> dict:
    run = subprocess.run(
        [sys.executable, str(MEASURE), name], capture_output=True, text=True, timeout=900, cwd=ROOT
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def references() -> dict[str, dict]:
    """The reference of each assignment, measured once, when a case of it is first measured."""
    return {}


@pytest.mark.slow
@pytest.mark.parametrize("name", [c.name for c in cases_bounds.CASES])
def test_trusted_cost_within_2x_of_reference(name, references):
    aid = build.by_name()[name].expect.assignment
    if aid not in references:
        references[aid] = _measure(f"reference:{aid}")
        ref = references[aid]
        assert ref["score"] == ref["max_score"] - ref["skipped_points"], ref
    reference = references[aid]
    got = _measure(name)
    print(f"\n{name}: {got} (reference {reference})")
    assert got["trusted_peak_mb"] <= 2 * reference["trusted_peak_mb"], (got, reference)
    # CPU time: 2x, plus 0.5 s for timer noise on a reference under a second
    assert got["trusted_cpu_s"] <= 2 * reference["trusted_cpu_s"] + 0.5, (got, reference)


@pytest.mark.slow
def test_batch_over_the_bounds_family(tmp_path):
    """grade-all over the bounds cases (and the reference): one row per submission, no failure,
    every report written (the reports read each hostile metrics.json again)."""
    import os
    import sqlite3

    from grader.batch import grade_all
    from grader.core.course import load_course

    root = build.make_corpus_root(ROOT, tmp_path / "root")
    ctx = build.make_ctx(root, ROOT)
    names = [c.name for c in cases_bounds.CASES]
    subs = tmp_path / "class"
    build.build_all(ctx, subs, names)
    students, grade_one = build.batch_grade_one(root, names)
    out = tmp_path / "out"
    with open(os.devnull, "w") as quiet:
        outcome = grade_all(
            subs,
            out,
            jobs=2,
            grade_one=grade_one,
            course=load_course(root),
            progress=quiet,
            summary=quiet,
        )
    assert not outcome.failed, outcome.failed
    assert sorted(outcome.graded) == sorted(students)
    con = sqlite3.connect(out / "gradebook.db")
    try:
        rows = con.execute(
            "select s.id, count(*) from student s join submitted_assignment a "
            "on a.student_id = s.id group by s.id"
        ).fetchall()
    finally:
        con.close()
    assert sorted(r[0] for r in rows) == sorted(students)
    for s in students:
        for name in ("result.json", "report.md", "report.html"):
            assert (out / s / name).stat().st_size > 0, (s, name)
