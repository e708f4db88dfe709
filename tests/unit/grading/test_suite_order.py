"""The order a grading runs its suites in (issue 50, docs/PRIVACY.md): the public suites of every
assignment, then the cell warnings, then the hidden suites, so that nothing a hidden test gives
the student's code reaches what is shown before the hidden feedback is due. The sandboxed
proof is the corpus's privacy family; here the order itself, and the refusal a hidden test
raises, with the suites' runner replaced by a recorder."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from factories import ROOT

from grader.core.course import load_course
from grader.core.results import AssignmentResult
from grader.core.results import TestResult as Case
from grader.core.timing import ImpossibleTime
from grader.grading import grade

COURSE = load_course(ROOT)
IDS = ["gpu_fundamentals", "m9_roofline"]
SECRET = "transpose_tiled on float32[4096, 4096]"


class Backend:
    def __init__(self, calls: list) -> None:
        self.calls = calls

    def cell_warnings(self, assignment: str, timeout: float) -> list[str]:
        self.calls.append(("cells", assignment))
        return [f"{assignment}: a cell failed"]

    def raise_refusal(self) -> None:
        pass


def _run(calls: list, refuse: str | None = None):
    def run_assignment(root, a, submission, metrics, *, suites, **kwargs):
        (suite,) = suites
        calls.append((suite, a))
        if suite == refuse:
            raise ImpossibleTime("a timing the grader cannot trust", f"{SECRET} took 0.001 ms")
        t = Case(f"{suite}/test_{a}", 1.0, 2.0, "failed", "why", suite, 0.5, [a])
        return AssignmentResult(a, 1.0, 2.0, raw_score=1.0, tests=[t], seed="s")

    return run_assignment


def _grade(monkeypatch, calls: list, refuse: str | None = None):
    monkeypatch.setattr(grade, "run_assignment", _run(calls, refuse))
    intake = SimpleNamespace(metrics_path=None, digest="d")
    warnings: list[str] = []
    results = grade._run_suites(ROOT, IDS, Path("/nonexistent"), intake, Backend(calls),
                                COURSE, "ada", warnings)  # fmt: skip
    return results, warnings


def test_every_public_suite_then_the_cell_warnings_then_every_hidden_suite(monkeypatch):
    calls: list = []
    results, warnings = _grade(monkeypatch, calls)
    assert calls == [
        ("public", "gpu_fundamentals"),
        ("public", "m9_roofline"),
        ("cells", "gpu_fundamentals"),
        ("cells", "m9_roofline"),
        ("hidden", "gpu_fundamentals"),
        ("hidden", "m9_roofline"),
    ]
    assert warnings == ["gpu_fundamentals: a cell failed", "m9_roofline: a cell failed"]
    for r, a in zip(results, IDS, strict=True):
        assert r.id == a and [t.name for t in r.tests] == [f"public/test_{a}", f"hidden/test_{a}"]
        assert (r.score, r.raw_score, r.max_score, r.seed) == (2.0, 2.0, 4.0, "s")


def test_the_hidden_runs_own_failure_quotes_none_of_its_output(monkeypatch):
    """pytest could not run the hidden suites (a grader fault): the error says so, without the
    excerpt of pytest's output that the public run's error keeps."""

    def run_assignment(root, a, submission, metrics, *, suites, **kwargs):
        error = f"the test suites could not run (pytest exit code 3): {suites[0]}/test_{SECRET}"
        return AssignmentResult(a, 0.0, 2.0, raw_score=0.0, error=error, seed="s")

    monkeypatch.setattr(grade, "run_assignment", run_assignment)
    intake = SimpleNamespace(metrics_path=None, digest="d")
    results = grade._run_suites(ROOT, IDS, Path("/nonexistent"), intake, Backend([]), COURSE,
                                "ada", [])  # fmt: skip
    for r in results:
        assert r.error is not None and f"hidden/test_{SECRET}" not in r.error
        assert f"public/test_{SECRET}" in r.error and "pytest exit code 3" in r.error
        assert grade.HIDDEN_OUTPUT in r.error


def test_a_refusal_in_a_hidden_test_names_no_hidden_measurement(monkeypatch):
    with pytest.raises(ImpossibleTime) as info:
        _grade(monkeypatch, [], refuse="hidden")
    exc = info.value
    assert exc.headline == "a timing the grader cannot trust"
    assert SECRET not in exc.detail and SECRET not in str(exc)
    assert "hidden test of gpu_fundamentals" in exc.detail and "grader grade" in exc.detail


def test_a_refusal_in_a_public_test_keeps_its_detail(monkeypatch):
    with pytest.raises(ImpossibleTime) as info:
        _grade(monkeypatch, [], refuse="public")
    assert SECRET in info.value.detail


def test_a_run_without_suites_adds_nothing_to_the_merge():
    none = AssignmentResult("m9_roofline", 0.0, 70.0, error="no test suites found for m9_roofline")
    t = Case("hidden/test_x", 1.0, 2.0, "failed", "why", "hidden", 0.5, ["x"])
    hidden = AssignmentResult("m9_roofline", 1.0, 2.0, raw_score=1.0, tests=[t], seed="s")
    merged = grade.merge_phases([none, hidden])
    assert (merged.error, merged.tests, merged.score, merged.max_score) == (None, [t], 1.0, 2.0)
    assert grade.merge_phases([none]).error == none.error
