"""The files `grader grade` writes on request: result JSON, markdown, HTML and any other.

Each requested output is written on its own: one that fails (a full disk, a folder that does not
exist) is named in the returned list and does not stop the others, and the caller turns the list
into its exit status, never silence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from grader.core.course import Course
from grader.core.results import GradeResult, validate
from grader.reports.html import html
from grader.reports.markdown import markdown

Output = tuple[str, str | None, Callable[[], None]]  # (flag, target or None, write)


def write_each(outputs: Sequence[Output]) -> list[str]:
    """Run each writer whose target is set; return `flag target (error)` for each that failed."""
    failed = []
    for flag, target, write in outputs:
        if not target:
            continue
        try:
            write()
        except Exception as exc:  # named in the returned list and the exit status, never silent
            failed.append(f"{flag} {target} ({type(exc).__name__}: {str(exc)[:300]})")
    return failed


def report_outputs(
    result: GradeResult,
    course: Course,
    *,
    json: str | None = None,
    markdown_path: str | None = None,
    html_path: str | None = None,
    metrics: Callable[[], dict | None] = lambda: None,
    reference: Callable[[], dict | None] = lambda: None,
) -> list[Output]:
    """The writers for the result's own files; `metrics` and `reference` are read only when
    the HTML page is asked for."""

    def write_json() -> None:
        validate(result.to_dict())
        result.write(json)

    def write_markdown() -> None:
        Path(markdown_path).write_text(markdown(result, course), encoding="utf-8")

    def write_html() -> None:
        Path(html_path).write_text(html(result, course, metrics(), reference()), "utf-8")

    return [
        ("--json", json, write_json),
        ("--markdown", markdown_path, write_markdown),
        ("--html", html_path, write_html),
    ]
