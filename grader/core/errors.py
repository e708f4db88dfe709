"""The grader's one error hierarchy and its exit codes: what went wrong decides how it exits.

Every exception the grader raises on purpose derives from `GraderError`, in one of three
branches, each with the exit code a command ends with when it reaches the CLI (`grader.cli.main`,
the one place that maps an error to an exit):

- `UsageError`: what the person running the grader gave must change (a flag, course.toml, a
  CSV, a file); the message names the file and what to fix. Exit 2.
- `SubmissionError`: what a submission supplied is refused (a notebook, a kernel, an artifact, a
  reply of the student's process). During a grading it becomes feedback and costs points; given
  directly on the command line it is bad input like any other. Exit 2.
- `InfrastructureError`: the grading machine cannot grade (its GPU does not work, a required
  isolation layer is missing). It stops a grading, never costs points: the callers record no
  score and tell the student that it is not their fault. Exit 3.

The exceptions a test sees when student code fails (`grader.suites.errors.StudentError`) stay
outside this tree: they are not the grader's word on its input but the student's own failure
carried into a test, each mirroring the builtin the student raised (``pytest.raises(ValueError)``
works), and they end as a test's outcome, never as an exit code.
"""

from __future__ import annotations

import enum
from typing import ClassVar


class ExitCode(enum.IntEnum):
    """How every grader command exits (`grader`, `python -m grader.github`, the batch).

    OK (0) done; FAILED (1) the work was judged and fell short: a check's tests failed, a release
    is stale, a batch had failures, a workflow step rejected an artifact; USAGE (2) the command
    line or an input must change (argparse's own code); INFRASTRUCTURE (3) the machine cannot
    grade, nothing was recorded; INTERRUPTED (130) Ctrl-C. Distinct so that a workflow can tell.
    """

    OK = 0
    FAILED = 1
    USAGE = 2
    INFRASTRUCTURE = 3
    INTERRUPTED = 130


class GraderError(Exception):
    """The root of every error the grader raises on purpose; `exit_code` is how a command ends."""

    exit_code: ClassVar[ExitCode] = ExitCode.USAGE


class UsageError(GraderError, ValueError):
    """The input the grader was given is wrong; the message names it and says what to fix.

    A ValueError too: it is bad input, and callers that caught ValueError still do."""


class SubmissionError(GraderError):
    """What a submission supplied cannot be taken (the message is feedback for its author).

    Not a ValueError: a test's ``pytest.raises(ValueError)`` must not pass on the grader's
    refusal of a student's work."""


class InfrastructureError(GraderError, RuntimeError):
    """The grading machine cannot grade; `headline` is one line for a student, `detail` the
    evidence and the fix for whoever runs the machine."""

    exit_code: ClassVar[ExitCode] = ExitCode.INFRASTRUCTURE

    def __init__(self, headline: str, detail: str = ""):
        self.headline, self.detail = headline, detail
        super().__init__(f"{headline}\n{detail}".rstrip())
