"""The one error hierarchy: every exception the grader defines derives from `GraderError`, on
the branch whose exit code it should end with, or is listed here with the reason it does not."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from grader.core.errors import (
    ExitCode,
    GraderError,
    InfrastructureError,
    SubmissionError,
    UsageError,
)

GRADER = Path(__file__).resolve().parents[3] / "grader"

# The exceptions a test sees when student code fails: the student's own failure carried into a
# test (mirroring the builtin they raised, so pytest.raises(ValueError) works), a test's outcome
# and never an exit code.
OUTSIDE = {
    "grader.suites.errors.StudentError": "the student's failure as a test sees it",
    "grader.suites.errors.MissingFunction": "StudentError family (an AttributeError to a test)",
    "grader.suites.errors.NotebookFailed": "StudentError family",
    "grader.suites.errors.NotPlainResult": "StudentError family",
    "grader.suites.errors.WorkerTimeout": "StudentError family (decided by the trusted side)",
    "grader.suites.errors.WorkerCrashed": "StudentError family (decided by the trusted side)",
    "grader.suites.errors.KernelRefused": "StudentError family (decided by the trusted side)",
    "grader.suites.errors.SanitizerFinding": "StudentError family (decided by the trusted side)",
}

# Where a class keeps a builtin base for its callers' sake (they catch the builtin).
BUILTIN_TOO = {
    "grader.gradebook.GradebookError": OSError,
    "grader.sandbox.seccomp.SeccompUnavailable": OSError,
    "grader.sandbox.harness.MissingName": AttributeError,
    "grader.sandbox.wire.NotPlainData": TypeError,
    "grader.core.notebook.NotebookError": ValueError,
    "grader.core.jsonread.JsonReadError": ValueError,
    "grader.github.artifact.ArtifactError": ValueError,
    "grader.sandbox.isolation.IsolationRefused": RuntimeError,
    "grader.simt.cudaapi.SimulatorRefusal": AttributeError,
    "grader.simt.sanitizer.SanitizerStop": IndexError,
}


def _exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined at the top of a grader module, by its dotted name."""
    found = {}
    for path in sorted(GRADER.rglob("*.py")):
        if path.name == "__main__.py":  # runs its command on import
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = [n.name for n in tree.body if isinstance(n, ast.ClassDef) and n.bases]
        if not names:
            continue
        parts = path.relative_to(GRADER.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mod = importlib.import_module(module)
        for name in names:
            cls = getattr(mod, name)
            if isinstance(cls, type) and issubclass(cls, BaseException):
                found[f"{module}.{name}"] = cls
    return found


def test_every_grader_exception_is_a_grader_error_or_listed_with_its_reason():
    found = _exception_classes()
    assert "grader.sandbox.isolation.IsolationRefused" in found  # the walk sees the sandbox
    outside = [n for n, c in found.items() if not issubclass(c, GraderError)]
    stray = sorted(n for n in outside if n not in OUTSIDE)
    assert stray == [], f"derive these from a GraderError branch (grader.core.errors): {stray}"
    inside = sorted(n for n in OUTSIDE if issubclass(found[n], GraderError))
    assert inside == [], f"listed as outside the hierarchy, but inside it: {inside}"
    assert set(OUTSIDE) <= set(found), "a listed class no longer exists; drop it from OUTSIDE"
    for name, builtin in BUILTIN_TOO.items():
        assert issubclass(found[name], builtin), f"{name} lost its {builtin.__name__} base"


def test_isolation_refused_is_an_infrastructure_error_with_a_headline():
    from grader.sandbox.isolation import IsolationRefused

    exc = IsolationRefused("grading refused: isolation incomplete\nno bwrap; install bubblewrap")
    assert isinstance(exc, InfrastructureError) and exc.exit_code == 3
    assert exc.headline == "grading refused: isolation incomplete"
    assert exc.detail == "no bwrap; install bubblewrap"
    assert str(exc) == "grading refused: isolation incomplete\nno bwrap; install bubblewrap"


def test_the_exit_codes_keep_their_numbers():
    assert {c.name: int(c) for c in ExitCode} == {
        "OK": 0,
        "FAILED": 1,
        "USAGE": 2,
        "INFRASTRUCTURE": 3,
        "INTERRUPTED": 130,
    }


@pytest.mark.parametrize(
    ("branch", "code"),
    [
        (UsageError, ExitCode.USAGE),
        (SubmissionError, ExitCode.USAGE),
        (InfrastructureError, ExitCode.INFRASTRUCTURE),
    ],
)
def test_each_branch_carries_its_exit_code(branch, code):
    assert branch.exit_code is code and issubclass(branch, GraderError)


def test_a_usage_error_is_still_a_value_error_and_a_submission_error_is_not():
    """Callers that caught ValueError on bad input still do; a test's pytest.raises(ValueError)
    never passes on the grader's refusal of a student's kernel."""
    from grader.core.kernel_source import KernelSourceError

    assert issubclass(UsageError, ValueError)
    assert not issubclass(SubmissionError, ValueError)
    assert not issubclass(KernelSourceError, ValueError)
