"""The points audit over a graded batch: result.json, nbgrader's export and grades.csv agree and
add up exactly, and a broken identity is named."""

from __future__ import annotations

import json

from grader.batch.audit import audit, result_problems
from grader.core.points import after_penalty, split, total
from grader.core.results import AssignmentResult, Environment, GradeResult
from grader.core.results import TestResult as Case
from grader.gradebook import export_csv, nbgrader_rows, record


def graded(student: str, k: int, late: float) -> GradeResult:
    """A student with parametrized tests split in eighths, a few failed, and a late penalty."""
    assignments = []
    for aid, shape in (("gpu_fundamentals", [(3, 22), (2, 7), (4, 5)]), ("m9_roofline", [(1, 3)])):
        tests = []
        for n_test, (pts, n) in enumerate(shape):
            for i, share in enumerate(split(pts, n)):
                ok = (i + k + n_test) % 4 != 0
                tests.append(
                    Case(
                        f"hidden/test_{n_test}[{i}]",
                        share if ok else 0.0,
                        share,
                        "passed" if ok else "failed",
                    )
                )
        raw = total(t.score for t in tests)
        fraction = late if aid == "gpu_fundamentals" else 0.0
        score, _ = after_penalty(raw, fraction)
        most = total(t.max_score for t in tests)
        assignments.append(AssignmentResult(aid, score, most, fraction, raw, tests=tests))
    return GradeResult(
        student,
        total(a.score for a in assignments),
        total(a.max_score for a in assignments),
        Environment("cpu", True),
        assignments,
        timestamp="2026-12-15T10:00:00Z",
    )


def test_a_class_adds_up_everywhere(tmp_path, course):
    out = tmp_path / "out"
    for k in range(12):
        r = graded(f"s{k:02d}", k, (0.0, 0.1, 0.3)[k % 3])
        assert result_problems(r) == []
        (out / r.student).mkdir(parents=True)
        r.write(out / r.student / "result.json")
        record(out / "gradebook.db", r, course)
    export_csv(out / "gradebook.db", out / "grades.csv")
    assert audit(out) == []
    rows = nbgrader_rows(out / "gradebook.db")
    assert len(rows) == 24
    for row in rows:  # what `nbgrader export` prints: no float noise anywhere
        for key in ("raw_score", "late_submission_penalty", "score", "max_score"):
            assert len(row[key].partition(".")[2]) <= 3, row


def test_a_broken_identity_is_named(tmp_path, course):
    out = tmp_path / "out"
    r = graded("ann", 1, 0.1)
    (out / "ann").mkdir(parents=True)
    r.write(out / "ann" / "result.json")
    record(out / "gradebook.db", r, course)
    data = json.loads((out / "ann" / "result.json").read_text())
    data["assignments"][0]["score"] += 0.125
    data["score"] += 0.125
    (out / "ann" / "result.json").write_text(json.dumps(data))
    problems = audit(out)
    assert any("ann/gpu_fundamentals: score" in p and "less 10%" in p for p in problems)
    assert any(p.startswith("nbgrader export: ann/gpu_fundamentals score") for p in problems)
    data["score"] += 1
    (out / "ann" / "result.json").write_text(json.dumps(data))
    assert any("ann: total" in p for p in audit(out))
