"""The files `grader grade` writes on request: result JSON, markdown, HTML and any other.

Before grading, `unwritable` checks that every requested output can be written (its folder
exists and is writable, it is not a folder), so a grading that takes minutes is never lost to a
typo in `--json`. After grading, each requested output is written on its own: one that still
fails (a full disk) is named in the returned list and does not stop the others, and the caller
turns the list into its exit status, never silence.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from grader.core.course import Course
from grader.core.results import GradeResult, validate
from grader.reports.html import html
from grader.reports.markdown import markdown

Output = tuple[str, str | None, Callable[[], None]]  # (flag, target or None, write)


def unwritable(targets: Sequence[tuple[str, str | None]]) -> list[str]:
    """`flag target (why)` for each requested target that cannot be written; [] when all can."""
    problems = []
    for flag, target in targets:
        if not target:
            continue
        path = Path(target)
        folder = path.parent
        if path.is_dir():
            why = "it is a folder"
        elif not folder.is_dir():
            why = f"the folder {folder} does not exist"
        elif not os.access(folder, os.W_OK | os.X_OK):
            why = f"the folder {folder} is not writable"
        elif path.exists() and not os.access(path, os.W_OK):
            why = "the file is not writable"
        else:
            continue
        problems.append(f"{flag} {target} ({why})")
    return problems


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
        assert json is not None  # each writer runs only when its target is set (above)
        result.write(json)

    def write_markdown() -> None:
        assert markdown_path is not None
        Path(markdown_path).write_text(markdown(result, course), encoding="utf-8")

    def write_html() -> None:
        assert html_path is not None
        Path(html_path).write_text(html(result, course, metrics(), reference()), "utf-8")

    return [
        ("--json", json, write_json),
        ("--markdown", markdown_path, write_markdown),
        ("--html", html_path, write_html),
    ]
