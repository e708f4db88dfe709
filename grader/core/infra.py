"""The grader's own failures, kept apart from a student's: they stop a grading, never cost points.

Raised before any student code runs when the machine cannot grade authoritatively (its GPU does
not work, a required isolation layer is missing). The callers exit with INFRA_EXIT, record no
score, and tell the student that the submission was not graded and that it is not their fault.
"""

from __future__ import annotations

INFRA_EXIT = 3  # distinct from 1 (a refused submission) and 2 (bad usage), so a workflow can tell


class InfrastructureError(RuntimeError):
    """The grading machine cannot grade; `headline` is one line for a student, `detail` the
    evidence and the fix for whoever runs the machine."""

    def __init__(self, headline: str, detail: str = ""):
        self.headline, self.detail = headline, detail
        super().__init__(f"{headline}\n{detail}".rstrip())
