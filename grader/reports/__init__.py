"""Reports of one grading: markdown (PR comment, job summary), an HTML page, the roofline plot.

`write_reports` writes the set for one result; `markdown.markdown` and `html.html` render them.
Student text is escaped once, in `escape`; what both share is in `common`.

The class report (`class_report`: rendering; `class_data`: the numbers; `similarity`: the pairs)
is imported on its own, by the commands that write it: it loads matplotlib and copydetect.
"""

from __future__ import annotations

import json
from pathlib import Path

from grader.core.course import Course
from grader.core.files import atomic_write
from grader.core.results import GradeResult, validate
from grader.reports import html, markdown

__all__ = ["write_reports"]


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
    data = result.to_dict()
    validate(data)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": out / "result.json",
        "markdown": out / "report.md",
        "html": out / "report.html",
    }
    atomic_write(paths["markdown"], markdown.markdown(result, course))
    atomic_write(paths["html"], html.html(result, course, metrics, reference))
    # result.json last: its presence means the whole set is complete (batch resume relies on it)
    atomic_write(paths["json"], json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n")
    return paths
