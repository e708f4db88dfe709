"""The release's stub: the one text every cleared solution region becomes.

Release writes it (grader.release.build); intake counts it to tell which file of a pair a student
worked in when there is no separate release to compare with (a student's own clone).
"""

from __future__ import annotations

STUB_MESSAGE = "{function}: implement this (see the docstring)"
STUB_TAIL = STUB_MESSAGE.format(function="")  # ": implement this (see the docstring)"


def count_stubs(source: str) -> int:
    """How many release stubs are still in a graded source."""
    return source.count(STUB_TAIL)


def is_stub_feedback(feedback: str) -> bool:
    """Whether a failing test's feedback says the graded function is still the release's stub."""
    return STUB_TAIL in (feedback or "") or "is still the stub" in (feedback or "")
