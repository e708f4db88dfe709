"""What both reports share: limits, outcome icons, percentages, folding of feedback.

Scores are shown in the one points format (`grader.core.points.shown` and `fraction`, `12.5 / 40`)
and a test's feedback is capped once, where it is stored (`grader.core.feedback`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from grader.core.course import Course
from grader.core.points import shown
from grader.core.results import AssignmentResult, GradeResult, TestResult

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
    if result.duration_s:  # 0 in a student view that holds hidden feedback back (visibility)
        parts.append(f"{result.duration_s:.1f} s")
    return " · ".join(parts)


def when(iso: str) -> str:
    """An ISO 8601 time as a reader reads it, in UTC: `2026-12-23 23:59 UTC`."""
    try:
        t = datetime.fromisoformat(iso)
    except ValueError:
        return iso
    if t.tzinfo is None:
        return iso
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def notes(a: AssignmentResult) -> list[str]:
    """What the staff's data and the feedback policy did to an assignment, in plain text (each
    report escapes it): the extension, the overrides with their reasons, the policy applied."""
    out = []
    if a.extended_due:
        out.append(f"Due date extended to {when(a.extended_due)}.")
    if a.override:
        o = a.override
        out.append(
            f"Score set to {shown(o['points'])} by the course staff (graded: "
            f"{shown(o['auto_score'])}): {o['reason']}"
        )
    for t in a.tests:
        if t.override:
            o = t.override
            out.append(
                f"{t.name}: {shown(o['points'])} points set by the course staff (graded: "
                f"{shown(o['auto_score'])}): {o['reason']}"
            )
    policy = a.feedback_policy
    if a.hidden_feedback == "held":
        out.append(
            f"Feedback policy {policy}: the hidden tests show their score per graded function "
            f"until your due date, {when(a.feedback_until or '')}; their full feedback is shown "
            "after it."
        )
    elif a.hidden_feedback == "scores":
        out.append(
            f"Feedback policy {policy}: the hidden tests show their score per graded function."
        )
    elif policy != "full":
        out.append(f"Feedback policy {policy}: every test's feedback is shown here.")
    return out
