"""The CLI's tables show student text through `visible`: nothing in them is invisible, rewrites
the row around it, or stops the print."""

from __future__ import annotations

import io

from grader.core.results import AssignmentResult
from grader.core.results import TestResult as Row
from grader.grading.check import Checked
from grader.reports.terminal import assignment_table, check_report

HOSTILE = "got 1\u202e0 = tcepxe\x1b[2K\x1b]0;pwned\x07 \ud800 ok"


def _checked() -> Checked:
    tests = [
        Row("test_add", 0.0, 1.0, "failed", feedback=HOSTILE, suite="public"),
        Row("test_sub", 1.0, 1.0, "passed", suite="public"),
    ]
    result = AssignmentResult(
        id="gpu_fundamentals", score=1.0, max_score=2.0, late_penalty=0.0, raw_score=1.0,
        graded_file="exercises/gpu_fundamentals/gpu_fundamentals.py", tests=tests,
        error=f"bad cell: {HOSTILE}",
    )  # fmt: skip
    return Checked(result, "exercises/gpu_fundamentals/\u2067x.py", warnings=[HOSTILE])


def _printable(text: str) -> None:
    """What a UTF-8 terminal would be sent: no escape, no bidi control, no surrogate."""
    io.TextIOWrapper(io.BytesIO(), encoding="utf-8").write(text)  # a surrogate raises here
    assert "\x1b" not in text and "\x07" not in text
    assert not any(ch in text for ch in "\u202e\u2067"), text


def test_check_report_shows_student_text_inert():
    for verbose in (False, True):
        text = check_report([_checked()], verbose=verbose)
        _printable(text)
        assert "<U+202E>" in text and "<U+D800>" in text and "<U+2067>x.py" in text
        assert "warning: got 1<U+202E>0" in text
        assert "shortened to one line" not in text  # one line: made visible, not cut


def test_the_assignment_table_shows_its_error_inert():
    text = assignment_table([_checked().result])
    _printable(text)
    assert "bad cell: got 1<U+202E>0" in text
