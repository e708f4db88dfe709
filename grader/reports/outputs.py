"""The one report writer: every report file of one result is rendered and written here.

`write_reports` writes the whole set of one result into a folder (grade-all, grade-pr, the demo);
`report_outputs` writes the ones `grader grade` is asked for, each at its own path. Both write
through `_write`: `grader.core.files.atomic_write` for the pages, `GradeResult.write` (atomic
too) for result.json, so the same result gives the same bytes whichever command wrote them, and
a reader never sees half a file.

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
from grader.core.files import atomic_write
from grader.core.results import GradeResult, validate
from grader.reports.html import html
from grader.reports.markdown import markdown

Output = tuple[str, str | None, Callable[[], None]]  # (flag, target or None, write)
# The files of one result in a folder, in the order written: result.json last, as its presence
# means the whole set is complete (batch resume relies on it).
REPORT_FILES = {"markdown": "report.md", "html": "report.html", "json": "result.json"}


def _write(
    kind: str,
    path: Path,
    result: GradeResult,
    course: Course,
    metrics: Callable[[], dict | None],
    reference: Callable[[], dict | None],
) -> None:
    """One report file, atomically; result.json is the result's own `GradeResult.write`."""
    if kind == "json":
        result.write(path)
    elif kind == "markdown":
        atomic_write(path, markdown(result, course))
    else:
        atomic_write(path, html(result, course, metrics(), reference()))


def write_reports(
    result: GradeResult,
    course: Course,
    out_dir: Path | str,
    metrics: dict | None = None,
    reference: dict | None = None,
) -> dict[str, Path]:
    """Write result.json (validated against the schema), report.md and report.html atomically.

    Returns {"json": ..., "markdown": ..., "html": ...}. Raises ValueError if the result does not
    match the schema (nothing is written then).
    """
    validate(result.to_dict())
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {kind: out / name for kind, name in REPORT_FILES.items()}
    for kind, path in paths.items():
        _write(kind, path, result, course, lambda: metrics, lambda: reference)
    return paths


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

    def writer(kind: str, target: str | None) -> Callable[[], None]:
        def write() -> None:
            assert target is not None  # a writer runs only when its target is set
            if kind == "json":
                validate(result.to_dict())
            _write(kind, Path(target), result, course, metrics, reference)

        return write

    return [
        ("--json", json, writer("json", json)),
        ("--markdown", markdown_path, writer("markdown", markdown_path)),
        ("--html", html_path, writer("html", html_path)),
    ]
