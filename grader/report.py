"""Reports of one grading: markdown for the PR comment / job summary, and an HTML feedback page.

Everything a student controls (feedback carries their exception messages and printed values,
warnings name their files, metrics.json is theirs) is escaped before it reaches markdown or HTML,
and truncated so that a megabyte of output cannot blow GitHub's 65,536-character comment limit.
"""

from __future__ import annotations

import base64
import html as _html
import io
import json
import math
import re
from pathlib import Path
from typing import Any

from grader.core.files import atomic_write
from grader.core.points import shown
from grader.course import Course
from grader.results import AssignmentResult, GradeResult, TestResult, validate

FEEDBACK_CHARS = 1_500  # per test, markdown
HTML_FEEDBACK_CHARS = 20_000  # per test, HTML page
NAME_CHARS = 200
WARNING_CHARS = 500
MAX_WARNINGS = 50
BODY_BYTES = 60_000  # GitHub rejects comments over 65,536 characters; keep a margin (in bytes)

EMOJI = {
    "passed": "✅",
    "failed": "❌",
    "error": "💥",
    "timeout": "⏱️",
    "skipped": "⏭️",
}
FAILING = ("failed", "error", "timeout")
M9_KEYS = ("intensity_b1", "intensity_b8", "intensity_b32")


# ----------------------------------------------------------------------------- text helpers


def _clip(text: str, limit: int) -> str:
    """At most `limit` characters of `text`, with a visible note of what was cut."""
    text = str(text)
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… [truncated: {len(text) - limit:,} more characters]"


_MD_INLINE = {
    "&": "&amp;",
    "<": "&lt;",
    ">": "&gt;",
    "|": "&#124;",
    "`": "&#96;",
    "@": "&#64;",  # no @mentions from student text
    "#": "&#35;",  # no #123 issue links
    "\\": "&#92;",
    "*": "&#42;",
    "_": "&#95;",
    "[": "&#91;",
    "]": "&#93;",
    "~": "&#126;",
    "!": "&#33;",
    "$": "&#36;",  # no math rendering
    ":": "&#58;",  # no :emoji: shortcodes or autolinked URLs
}
_MD_RE = re.compile("|".join(re.escape(k) for k in _MD_INLINE))


def md_inline(text: str, limit: int = NAME_CHARS) -> str:
    """Student-controlled text as one inert line of markdown (safe inside a table cell)."""
    text = _clip(str(text), limit)
    text = " ".join(text.split())  # newlines and tabs would end the table row
    return _MD_RE.sub(lambda m: _MD_INLINE[m.group(0)], text)


def md_block(text: str, limit: int = FEEDBACK_CHARS) -> str:
    """Student-controlled multi-line text as an inert preformatted block.

    `<pre>` with HTML-escaped content: GitHub renders it verbatim (no markdown inside), and an
    escaped `</pre>` in the text cannot close it.
    """
    text = _clip(str(text), limit).replace("\r\n", "\n").replace("\r", "\n")
    text = _html.escape(text, quote=True)
    for ch, entity in (("@", "&#64;"), ("#", "&#35;"), ("|", "&#124;"), ("`", "&#96;")):
        text = text.replace(ch, entity)
    return f"<pre>{text}</pre>"


def _num(x: float) -> str:
    return shown(x)  # the one points format (grader.core.points)


def _pts(score: float, max_score: float) -> str:
    return f"{_num(score)} / {_num(max_score)}"


def _pct(score: float, max_score: float) -> str:
    return f"{100 * score / max_score:.1f}%" if max_score else "–"


def _title(course: Course, assignment_id: str) -> str:
    try:
        return course.assignment(assignment_id).title
    except ValueError:
        return assignment_id


def _failing_first(tests: list[TestResult]) -> list[TestResult]:
    order = {"error": 0, "timeout": 1, "failed": 2, "skipped": 3, "passed": 4}
    return sorted(tests, key=lambda t: order.get(t.outcome, 0))


# ----------------------------------------------------------------------------- markdown


def _env_line(result: GradeResult) -> str:
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


def _md_assignment(a: AssignmentResult, course: Course) -> list[str]:
    """Blocks (each valid markdown on its own) for one assignment."""
    blocks: list[str] = []
    title = md_inline(_title(course, a.id))
    head = f"### {title} ({md_inline(a.id)}): {_pts(a.score, a.max_score)}"
    if a.late_penalty:
        head += (
            f"\n\n⏰ Late penalty: **{a.late_penalty * 100:.0f}%** of "
            f"{_num(a.raw_score)} points taken off."
        )
    if a.error:
        head += f"\n\n💥 **This assignment could not be graded:**\n\n{md_block(a.error)}"
    blocks.append(head)
    not_passed = [t for t in _failing_first(a.tests) if t.outcome != "passed"]
    passed = [t for t in a.tests if t.outcome == "passed"]
    if not a.tests:
        blocks.append("_No tests ran._")
    elif not_passed:
        rows = ["| | Test | Points | Outcome |", "|---|---|---:|---|"]
        rows += [
            f"| {EMOJI.get(t.outcome, '?')} | {md_inline(t.name)} | {_pts(t.score, t.max_score)} "
            f"| {md_inline(t.outcome)} |"
            for t in not_passed
        ]
        blocks.append("\n".join(rows))
    else:
        blocks.append(f"✅ All {len(passed)} tests passed.")
    for t in not_passed:
        if t.outcome in FAILING or t.feedback:
            fb = md_block(t.feedback) if t.feedback else "_no feedback_"
            blocks.append(
                f"**{EMOJI.get(t.outcome, '?')} {md_inline(t.name)}** "
                f"({md_inline(t.outcome)}, {_pts(t.score, t.max_score)})\n\n{fb}"
            )
    if passed:
        rows = ["| | Test | Points |", "|---|---|---:|"]
        rows += [
            f"| {EMOJI['passed']} | {md_inline(t.name)} | {_pts(t.score, t.max_score)} |"
            for t in passed
        ]
        got = sum(t.score for t in passed)
        top = sum(t.max_score for t in passed)
        blocks.append(
            f"<details><summary>{len(passed)} passed tests ({_pts(got, top)} points)</summary>"
            f"\n\n" + "\n".join(rows) + "\n\n</details>"
        )
    return blocks


def markdown(result: GradeResult, course: Course, limit: int = BODY_BYTES) -> str:
    """The PR comment / job summary. At most `limit` UTF-8 bytes, whatever the feedback size."""
    icon = "✅" if result.max_score and result.score >= result.max_score else "📝"
    header = [
        f"## {icon} {md_inline(course.title)}: {_pts(result.score, result.max_score)} "
        f"({_pct(result.score, result.max_score)})",
        f"Student: **{md_inline(result.student)}**"
        + (f" · submitted {md_inline(result.timestamp)}" if result.timestamp else ""),
    ]
    summary = ["| Assignment | Score | Late penalty | Status |", "|---|---:|---:|---|"]
    for a in result.assignments:
        counts: dict[str, int] = {}
        for t in a.tests:
            counts[t.outcome] = counts.get(t.outcome, 0) + 1
        status = (
            "could not be graded"
            if a.error
            else ", ".join(f"{n} {o}" for o, n in sorted(counts.items()))
        )
        late = f"{a.late_penalty * 100:.0f}%" if a.late_penalty else "–"
        summary.append(
            f"| {md_inline(a.id)} | {_pts(a.score, a.max_score)} | {late} | {md_inline(status)} |"
        )
    header.append("\n".join(summary))
    if result.warnings:
        shown = result.warnings[:MAX_WARNINGS]
        lines = ["**⚠️ Warnings**", ""] + [f"- {md_inline(w, WARNING_CHARS)}" for w in shown]
        if len(result.warnings) > len(shown):
            lines.append(f"- … and {len(result.warnings) - len(shown)} more")
        header.append("\n".join(lines))

    footer = f"<sub>{md_inline(_env_line(result), 1000)}</sub>"
    body: list[str] = []
    for a in result.assignments:
        body.extend(_md_assignment(a, course))

    sep = "\n\n"
    note_reserve = 300
    used = sum(len(b.encode()) + len(sep) for b in (*header, footer)) + note_reserve
    out = list(header)
    omitted = 0
    for i, block in enumerate(body):
        size = len(block.encode()) + len(sep)
        if used + size > limit:
            omitted = len(body) - i
            break
        out.append(block)
        used += size
    if omitted:
        out.append(
            f"> ✂️ **Report truncated**: {omitted} more sections did not fit in a comment. "
            "The full report is in the job's artifacts (report.html, result.json)."
        )
    out.append(footer)
    text = sep.join(out) + "\n"
    if len(text.encode()) > limit:  # only reachable with a tiny `limit`: hard cut, still valid
        text = text.encode()[: limit - 64].decode("utf-8", "ignore") + "\n\n✂️ truncated\n"
    return text


# ----------------------------------------------------------------------------- roofline


def _m9_points(data: Any, label: str) -> tuple[dict[str, float], list[str]]:
    """Valid intensities from an m9 record (or a metrics dict holding one) and the problems."""
    if data is None:
        return {}, [f"no {label} M9 metrics"]
    if isinstance(data, dict) and "m9_roofline" in data:
        data = data["m9_roofline"]
    if not isinstance(data, dict):
        return {}, [f"{label} m9_roofline is not a table of numbers"]
    points: dict[str, float] = {}
    problems: list[str] = []
    for key in M9_KEYS:
        value = data.get(key)
        if value is None:
            problems.append(f"{label} {key} missing")
        elif (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not 0 < value <= 1e9
        ):
            problems.append(f"{label} {key} is not a positive number")
        else:
            points[key] = float(value)
    return points, problems


def roofline_png(
    course: Course, metrics: dict | None = None, reference: dict | None = None
) -> tuple[bytes, list[str]]:
    """PNG of the course GPU's roofline with the student's and the reference M9 points.

    Returns (png bytes, notes about missing or unusable metrics). Never raises on bad metrics.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    gpu = course.gpu
    peak, bw = gpu.peak_flops, gpu.peak_bandwidth
    ridge = peak / bw
    mine, notes = _m9_points(metrics, "student")
    ref, ref_notes = _m9_points(reference, "reference") if reference is not None else ({}, [])
    notes += ref_notes

    values = [*mine.values(), *ref.values(), ridge]
    lo = 10 ** math.floor(math.log10(min(values) / 4))
    hi = 10 ** math.ceil(math.log10(max(values) * 4))
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]

    def attainable(x: float) -> float:
        return min(x * bw, peak)

    fig = Figure(figsize=(7, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.loglog(xs, [attainable(x) / 1e12 for x in xs], color="#333", lw=2, label=f"{gpu.name} roof")
    ax.axvline(ridge, color="#999", ls=":", lw=1)
    ax.annotate(
        f"ridge ≈ {ridge:.0f} FLOP/B",
        (ridge, peak / 1e12),
        textcoords="offset points",
        xytext=(5, -15),
        fontsize=8,
        color="#555",
    )
    markers = {"intensity_b1": "o", "intensity_b8": "s", "intensity_b32": "^"}
    for key, x in ref.items():
        ax.plot(
            [x],
            [attainable(x) / 1e12],
            markers[key],
            ms=11,
            mfc="none",
            mec="#1f77b4",
            mew=2,
            label=f"reference batch {key.removeprefix('intensity_b')}",
        )
    for key, x in mine.items():
        ax.plot(
            [x],
            [attainable(x) / 1e12],
            markers[key],
            ms=7,
            color="#d62728",
            label=f"yours batch {key.removeprefix('intensity_b')}",
        )
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("attainable TFLOP/s")
    ax.set_title(f"Decode on the {gpu.name} roofline (M9)")
    ax.grid(True, which="both", alpha=0.25)
    if notes:
        ax.text(
            0.02,
            0.97,
            "\n".join(notes[:6]),
            transform=ax.transAxes,
            va="top",
            fontsize=8,
            color="#b00",
            bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "#b00"},
        )
    ax.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue(), notes


# ----------------------------------------------------------------------------- HTML

_CSS = """
body{font:15px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:980px;
margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:1.8em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;width:100%;margin:.6em 0}
th,td{border:1px solid #ddd;padding:.35em .6em;text-align:left;vertical-align:top}
th{background:#f6f6f6}td.n{text-align:right;white-space:nowrap}
tr.passed td.o{color:#1a7f37}tr.failed td.o,tr.error td.o,tr.timeout td.o{color:#cf222e}
tr.skipped td.o{color:#777}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;padding:.5em;margin:0;
max-height:24em;overflow:auto;font-size:13px}
.warn{background:#fff8c5;border:1px solid #d4a72c;padding:.5em 1em}
.err{background:#ffebe9;border:1px solid #cf222e;padding:.5em 1em}
.meta{color:#555;font-size:.9em}img{max-width:100%}
"""


def _e(text: Any) -> str:
    return _html.escape(str(text), quote=True)


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
        f"<title>{_e(course.title)}: {_e(result.student)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{_e(course.title)}</h1>",
        f"<p><strong>{_e(result.student)}</strong>: "
        f"<strong>{_e(_pts(result.score, result.max_score))}</strong> "
        f"({_e(_pct(result.score, result.max_score))})</p>",
    ]
    meta = _env_line(result) + (f" · submitted {result.timestamp}" if result.timestamp else "")
    parts.append(f'<p class="meta">{_e(meta)}</p>')
    if result.warnings:
        items = "".join(f"<li>{_e(_clip(w, WARNING_CHARS))}</li>" for w in result.warnings[:200])
        parts.append(f'<div class="warn"><strong>Warnings</strong><ul>{items}</ul></div>')

    parts.append("<table><tr><th>Assignment</th><th>Score</th><th>Late penalty</th></tr>")
    for a in result.assignments:
        late = f"{a.late_penalty * 100:.0f}% of {_num(a.raw_score)}" if a.late_penalty else "–"
        parts.append(
            f"<tr><td>{_e(_title(course, a.id))}</td><td class=n>{_e(_pts(a.score, a.max_score))}"
            f"</td><td class=n>{_e(late)}</td></tr>"
        )
    parts.append("</table>")

    for a in result.assignments:
        parts.append(
            f'<h2 id="{_e(a.id)}">{_e(_title(course, a.id))}: {_e(_pts(a.score, a.max_score))}</h2>'
        )
        if a.late_penalty:
            parts.append(
                f"<p>Late penalty: {a.late_penalty * 100:.0f}% of "
                f"{_e(_num(a.raw_score))} points.</p>"
            )
        if a.error:
            parts.append(
                f'<div class="err"><strong>Could not be graded:</strong>'
                f"<pre>{_e(_clip(a.error, HTML_FEEDBACK_CHARS))}</pre></div>"
            )
        if a.tests:
            parts.append(
                "<table><tr><th></th><th>Test</th><th>Points</th><th>Outcome</th>"
                "<th>Feedback</th></tr>"
            )
            for t in _failing_first(a.tests):
                fb = (
                    f"<pre>{_e(_clip(t.feedback, HTML_FEEDBACK_CHARS))}</pre>" if t.feedback else ""
                )
                parts.append(
                    f'<tr class="{_e(t.outcome)}"><td>{EMOJI.get(t.outcome, "?")}</td>'
                    f"<td>{_e(_clip(t.name, NAME_CHARS))}<br><small>{_e(t.suite)}</small></td>"
                    f"<td class=n>{_e(_pts(t.score, t.max_score))}</td>"
                    f"<td class=o>{_e(t.outcome)}</td><td>{fb}</td></tr>"
                )
            parts.append("</table>")

    parts.append("<h2>Your decode on the roofline (M9)</h2>")
    try:
        png, notes = roofline_png(course, metrics, reference)
        uri = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
        parts.append(f'<img alt="roofline of the {_e(course.gpu.name)}" src="{uri}">')
        if notes:
            parts.append("<p>" + "; ".join(_e(n) for n in notes) + "</p>")
    except Exception as exc:  # noqa: BLE001 - a broken plot must not cost the student the page
        parts.append(f"<p>The roofline plot could not be drawn: {_e(type(exc).__name__)}</p>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


# ----------------------------------------------------------------------------- files


def _atomic_write(path: Path, text: str) -> None:
    atomic_write(path, text)  # 0644: grader.core.files


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
    _atomic_write(paths["markdown"], markdown(result, course))
    _atomic_write(paths["html"], html(result, course, metrics, reference))
    # result.json last: its presence means the whole set is complete (batch resume relies on it)
    _atomic_write(paths["json"], json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n")
    return paths
