"""The HTML feedback page: self-contained (inline CSS, the roofline as a data URI), no scripts.

Student text reaches it only through `grader.reports.escape.html_text` (once). The test table
keeps one row per test; identical feedback is shown once, in the first test's row, with the other
tests listed there and pointing back to it.
"""

from __future__ import annotations

import base64

from grader.core.course import Course
from grader.core.feedback import clip
from grader.core.points import fraction, shown
from grader.core.results import AssignmentResult, GradeResult
from grader.reports import common, memory
from grader.reports.escape import html_text
from grader.reports.plots import roofline_png

HTML_FEEDBACK_CHARS = 20_000  # per test: the page has room for the whole stored text and more

_CSS = """
body{font:15px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:980px;
margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:1.8em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;width:100%;margin:.6em 0}
table.tests{table-layout:fixed}td{overflow-wrap:anywhere}
th,td{border:1px solid #ddd;padding:.35em .6em;text-align:left;vertical-align:top}
th{background:#f6f6f6}td.n{text-align:right;white-space:nowrap}
tr.passed td.o{color:#1a7f37}tr.failed td.o,tr.error td.o,tr.timeout td.o{color:#cf222e}
tr.skipped td.o{color:#777}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;padding:.5em;margin:0;
max-height:24em;overflow:auto;font-size:13px}
.warn{background:#fff8c5;border:1px solid #d4a72c;padding:.5em 1em}
.err{background:#ffebe9;border:1px solid #cf222e;padding:.5em 1em}
.meta{color:#555;font-size:.9em}img{max-width:100%}
.also{color:#555;font-size:.9em;margin:.3em 0 0}td.same{color:#555;font-size:.9em}
.note{background:#ddf4ff;border:1px solid #54aeff;padding:.4em 1em}
"""


_COLUMNS = (
    '<colgroup><col style="width:2.2em"><col style="width:30%"><col style="width:6.5em">'
    '<col style="width:6.5em"><col></colgroup>'
)


def _tests_table(a: AssignmentResult, anchors: list[int]) -> list[str]:
    """The rows of one assignment's tests, identical feedback shown once (see module doc)."""
    tests = common.failing_first(a.tests)
    where: dict[str, tuple[str, str]] = {}  # feedback -> (anchor id, first test's name)
    also = {fb.text: fb.tests[1:] for fb in common.fold_feedback(tests)}
    rows = [
        f'<table class="tests">{_COLUMNS}<tr><th></th><th>Test</th><th>Points</th>'
        "<th>Outcome</th><th>Feedback</th></tr>"
    ]
    for t in tests:
        name = clip(t.name, common.NAME_CHARS)
        if not t.feedback:
            cell = "<td></td>"
        elif t.feedback in where:
            anchor, first = where[t.feedback]
            cell = (
                f'<td class="same">same feedback as <a href="#{anchor}">{html_text(first)}</a></td>'
            )
        else:
            anchors[0] += 1
            anchor = f"fb{anchors[0]}"
            where[t.feedback] = (anchor, name)
            cell = (
                f'<td id="{anchor}"><pre>{html_text(clip(t.feedback, HTML_FEEDBACK_CHARS))}</pre>'
            )
            others = also.get(t.feedback, [])
            if others:
                listed = ", ".join(html_text(clip(o.name, common.NAME_CHARS)) for o in others)
                cell += (
                    f'<p class="also">The same feedback for {len(others)} more '
                    f"test{'s' if len(others) > 1 else ''}: {listed}</p>"
                )
            cell += "</td>"
        rows.append(
            f'<tr class="{html_text(t.outcome)}"><td>{common.EMOJI.get(t.outcome, "?")}</td>'
            f"<td>{html_text(name)}<br><small>{html_text(t.suite)}</small></td>"
            f"<td class=n>{html_text(fraction(t.score, t.max_score))}</td>"
            f"<td class=o>{html_text(t.outcome)}</td>{cell}</tr>"
        )
    rows.append("</table>")
    return rows


def _summary_table(result: GradeResult, course: Course) -> list[str]:
    """One row per assignment: score and late penalty, above the per-assignment sections."""
    rows = ["<table><tr><th>Assignment</th><th>Score</th><th>Late penalty</th></tr>"]
    for a in result.assignments:
        late = f"{a.late_penalty * 100:.0f}% of {shown(a.raw_score)}" if a.late_penalty else "–"
        rows.append(
            f"<tr><td>{html_text(common.title(course, a.id))}</td>"
            f"<td class=n>{html_text(fraction(a.score, a.max_score))}</td>"
            f"<td class=n>{html_text(late)}</td></tr>"
        )
    rows.append("</table>")
    return rows


def _roofline_section(course: Course, metrics: dict | None, reference: dict | None) -> list[str]:
    """The roofline of course.toml's `[metrics]` record as an inline PNG (none for a course
    without one); a plot that fails to draw becomes one line of text."""
    if course.metrics is None:
        return []
    parts = ["<h2>Your metrics on the roofline</h2>"]
    try:
        png, notes = roofline_png(course, metrics, reference)
        uri = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
        parts.append(f'<img alt="roofline of the {html_text(course.gpu.name)}" src="{uri}">')
        if notes:
            parts.append("<p>" + "; ".join(html_text(n) for n in notes) + "</p>")
    except Exception as exc:  # noqa: BLE001 - a broken plot must not cost the student the page
        parts.append(
            f"<p>The roofline plot could not be drawn: {html_text(type(exc).__name__)}</p>"
        )
    return parts


def html(
    result: GradeResult,
    course: Course,
    metrics: dict | None = None,
    reference: dict | None = None,
) -> str:
    """A self-contained HTML feedback page (inline CSS, PNG as a data URI, nothing external)."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width,initial-scale=1">',
        f"<title>{html_text(course.title)}: {html_text(result.student)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{html_text(course.title)}</h1>",
        f"<p><strong>{html_text(result.student)}</strong>: "
        f"<strong>{html_text(fraction(result.score, result.max_score))}</strong> "
        f"({html_text(common.pct(result.score, result.max_score))})</p>",
    ]
    meta = common.env_line(result) + (
        f" · submitted {result.timestamp}" if result.timestamp else ""
    )
    parts.append(f'<p class="meta">{html_text(meta)}</p>')
    if result.environment.not_authoritative:
        note = html_text(result.environment.not_authoritative)
        parts.append(f'<div class="err"><strong>⚠️ {note}</strong></div>')
    if result.warnings:
        items = "".join(
            f"<li>{html_text(clip(w, common.WARNING_CHARS))}</li>" for w in result.warnings[:200]
        )
        parts.append(f'<div class="warn"><strong>Warnings</strong><ul>{items}</ul></div>')

    parts.extend(_summary_table(result, course))

    anchors = [0]
    for a in result.assignments:
        parts.append(
            f'<h2 id="{html_text(a.id)}">{html_text(common.title(course, a.id))}: '
            f"{html_text(fraction(a.score, a.max_score))}</h2>"
        )
        if a.late_penalty:
            parts.append(
                f"<p>Late penalty: {a.late_penalty * 100:.0f}% of "
                f"{html_text(shown(a.raw_score))} points.</p>"
            )
        parts.extend(
            f'<p class="note">{html_text(clip(n, common.WARNING_CHARS))}</p>'
            for n in common.notes(a)
        )
        if a.error:
            parts.append(
                f'<div class="err"><strong>Could not be graded:</strong>'
                f"<pre>{html_text(clip(a.error, HTML_FEEDBACK_CHARS))}</pre></div>"
            )
        if a.tests:
            parts.extend(_tests_table(a, anchors))
        parts.extend(memory.html(a.memory, course.gpu.bandwidth_gbs, course.gpu.name))

    parts.extend(_roofline_section(course, metrics, reference))
    parts.append("</body></html>\n")
    return "\n".join(parts)
