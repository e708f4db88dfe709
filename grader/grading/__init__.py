"""Grading one submission: intake (the submission as data), its limits and digest, the graded
result.

- `limits`: `SubmissionLimits`, the one set of limits (the PR artifact check uses it too);
- `intake`: what is taken from a submission, copied into scratch; the submission digest;
- `pair` (from `grader.core.pairing`): which file of `<id>.py` / `<id>.ipynb` is graded;
- `reference`: the reference solution's metrics record for the reports' roofline;
- `grade`: `grade_submission`, intake + sandboxed suites + late policy -> one `GradeResult`.

`grade` and `reference` load the sandbox (numpy) and are imported on first use: the GitHub
artifact check imports this package on a bare Python, before anything is installed.
"""

from __future__ import annotations

from typing import Any

from grader.core.pairing import Pairing, pair, release_for
from grader.grading.intake import Intake, digest, prepare, submission_digest
from grader.grading.limits import LIMITS, SubmissionLimits

__all__ = [
    "LIMITS",
    "Intake",
    "Pairing",
    "SubmissionLimits",
    "apply_late_policy",
    "compute_reference_record",
    "digest",
    "grade_submission",
    "pair",
    "prepare",
    "reference_record",
    "release_for",
    "submission_digest",
]


def __getattr__(name: str) -> Any:
    # lazy: grade and reference import the sandbox (numpy); `python -m grader.github
    # validate-artifact` imports grader.grading.limits on a bare Python
    if name in ("grade_submission", "apply_late_policy"):
        from grader.grading import grade

        return getattr(grade, name)
    if name in ("compute_reference_record", "reference_record"):
        from grader.grading import reference

        return getattr(reference, name)
    raise AttributeError(f"module 'grader.grading' has no attribute {name!r}")
