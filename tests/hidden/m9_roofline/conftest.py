"""The course model the M9 hidden suites test with, taken from the reference solution.

The reference notebook's `COURSE_MODEL` is the one the release ships as the student's default
config, so the hidden suites name no copy of their own. A fresh dict per test: student code
called in-process gets the object itself.
"""

from __future__ import annotations

import pytest


@pytest.fixture  # grader: public (the line is in the grader and the public suites too)
def course_model(reference) -> dict:
    return dict(reference.COURSE_MODEL)
