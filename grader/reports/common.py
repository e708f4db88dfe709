"""What both reports share: limits, outcome icons, percentages, folding of feedback.

Scores are shown in the one points format (`grader.core.points.shown` and `fraction`, `12.5 / 40`)
and a test's feedback is capped once, where it is stored (`grader.core.feedback`).
"""

from __future__ import annotations

from dataclasses import dataclass

from grader.core.course import Course
from grader.core.results import GradeResult, TestResult

NAME_CHARS = 200
WARNING_CHARS = 500

EMOJI = {
    "passed": "✅",
    "failed": "❌",
    "error": "💥",
    "timeout": "⏱️",
    "skipped": "⏭️",
}
FAILING = ("failed", "error", "timeout")


def pct(score: float, max_score: float) -> str:
    return f"{100 * score / max_score:.1f}%" if max_score else "–"


def title(course: Course, assignment_id: str) -> str:
    try:
        return course.assignment(assignment_id).title
    except ValueError:
        return assignment_id


def failing_first(tests: list[TestResult]) -> list[TestResult]:
    order = {"error": 0, "timeout": 1, "failed": 2, "skipped": 3, "passed": 4}
    return sorted(tests, key=lambda t: order.get(t.outcome, 0))


@dataclass
class Feedback:
    """One feedback text and every test (in report order) that received exactly it."""

    text: str
    tests: list[TestResult]


def fold_feedback(tests: list[TestResult]) -> list[Feedback]:
    """Identical feedback across tests as one entry listing the tests (a notebook that fails to
    load gives every test the same message: shown once, not 57 times)."""
    groups: dict[str, Feedback] = {}
    for t in tests:
        if t.feedback:
            groups.setdefault(t.feedback, Feedback(t.feedback, [])).tests.append(t)
    return list(groups.values())


def env_line(result: GradeResult) -> str:
    """Where and how it was graded (plain text; each report escapes it)."""
    env = result.environment
    device = env.device or "unknown device"
    if env.simulator and "simulator" not in device.lower():
        device += " (CUDA simulator)"
    parts = [f"Graded on {device}", f"isolation: {', '.join(env.isolation) or 'none'}"]
    if env.grader_version:
        parts.append(f"grader {env.grader_version}")
    if env.python:
        parts.append(f"Python {env.python}")
    parts.append(f"{result.duration_s:.1f} s")
    return " · ".join(parts)
