"""The class report: where a class struggles, after `grader grade-all`.

`grader class-report OUT` reads a graded batch (OUT is grade-all's `--out`: `<student>/result.json`
and `state.jsonl`, whose entries the caller reads and passes in) and writes `OUT/class-report/`:
`index.html`, `summary.md`, `scores.png` and `class-report.json` (the data, schema-versioned).
It shows a roster (every student: score and status per assignment, linking to their report),
the score distribution (a histogram of total scores, and per assignment mean/median/min/max and
how many could not be graded), pass rates per graded function and per test (parametrized cases
folded; the untouched stub counted as "not attempted", apart from wrong answers, with the
commonest wrong answer), the tests whose outcome changed in the last regrade, late submissions,
and the pairs of students whose graded cells are similar, for the instructor to look at, never a
verdict (the page says so). What is shown is computed in
grader.reports.class_data and grader.reports.similarity; this module renders it.

Every student-controlled text is escaped in both outputs, through grader.reports.escape alone
(`md_inline` for markdown, `html_text` for the page: control and bidi characters made visible).
"""

from __future__ import annotations

import io
import json
import statistics
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from grader.core.course import Course
from grader.core.errors import UsageError
from grader.core.files import atomic_write
from grader.core.points import fraction, shown
from grader.core.tables import format_table
from grader.reports.class_data import (
    MESSAGE_CHARS,
    ClassReport,
    PassRate,
    RosterCell,
    RosterRow,
    build,
    submission_paths,
)
from grader.reports.escape import html_text, md_inline
from grader.reports.similarity import THRESHOLD

__all__ = ["REPORT_DIR", "THRESHOLD", "terminal_summary", "write_class_report"]

REPORT_DIR = "class-report"
MAX_PAIRS_SHOWN = 100


# ----------------------------------------------------------------------------- outputs


def histogram_png(scores: Iterable[float], max_score: float) -> bytes:
    """Total scores in ten bins over 0..max (matplotlib's Agg canvas: no display needed)."""
    values = list(scores)
    top = max_score or max(values, default=1.0) or 1.0
    fig = Figure(figsize=(6.4, 3.2), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.hist(values, bins=10, range=(0, top), color="#4c72b0", edgecolor="white")
    ax.set_xlabel(f"total score (of {shown(top)})")
    ax.set_ylabel("students")
    ax.set_title(f"Score distribution ({len(values)} students)")
    ax.yaxis.get_major_locator().set_params(integer=True)  # type: ignore[call-arg]  # MaxNLocator
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _rate(t: PassRate) -> str:
    return "–" if t.pass_rate is None else f"{100 * t.pass_rate:.0f}%"


def _md(text: object) -> str:
    return md_inline(str(text), MESSAGE_CHARS)


def _cell(c: RosterCell) -> str:
    """`36 / 59` (graded), `36 / 59 late`, or the status alone when there is no score."""
    if c.score is None:
        return c.status
    text = fraction(c.score, c.max_score)
    return text if c.status == "graded" else f"{text} {c.status}"


def _total(row: RosterRow) -> str:
    return "–" if row.score is None else fraction(row.score, row.max_score)


def _md_changes_and_late(rep: ClassReport) -> list[str]:
    """The markdown sections on outcomes the last regrade changed, late submissions and the
    staff's decisions."""
    out: list[str] = []
    out += ["", "## Changed in the last regrade", ""]
    if rep.changes:
        out += ["| student | assignment | test | before | after |", "|---|---|---|---|---|"]
        for c in rep.changes[:MAX_PAIRS_SHOWN]:
            out.append(
                f"| {_md(c.student)} | {_md(c.assignment)} | {_md(c.test)} | {c.before} "
                f"| {c.after} |"
            )
    else:
        out.append("No test changed its outcome.")
    out += ["", "## Late submissions", ""]
    if rep.late:
        out += [
            "| student | assignment | submitted | due | hours late | penalty |",
            "|---|---|---|---|---:|---:|",
        ]
        for x in rep.late:
            hours = "–" if x.hours_late is None else f"{x.hours_late:g}"
            due = f"{x.due} (extended)" if x.extended else x.due
            out.append(
                f"| {_md(x.student)} | {_md(x.assignment)} | {_md(x.submitted or '–')} "
                f"| {_md(due)} | {hours} | {100 * x.penalty:.0f}% |"
            )
    else:
        out.append("None.")
    out += ["", "## Extensions and overrides", ""]
    if rep.staff:
        out += ["| student | assignment | kind | what |", "|---|---|---|---|"]
        for d in rep.staff:
            out.append(f"| {_md(d.student)} | {_md(d.assignment)} | {d.kind} | {_md(d.what)} |")
    else:
        out.append("None.")
    return out


def _md_similar(rep: ClassReport) -> list[str]:
    """The markdown section on similar pairs, with the caveat that it is not a verdict."""
    out: list[str] = []
    out += [
        "",
        "## Similar graded cells (for you to look at; not a verdict)",
        "",
        SIMILARITY_CAVEAT,
        "",
    ]
    if rep.similar:
        out += [
            "| assignment | student | student | share of each one's code | tokens |",
            "|---|---|---|---|---:|",
        ]
        for p in rep.similar[:MAX_PAIRS_SHOWN]:
            out.append(
                f"| {_md(p.assignment)} | {_md(p.student_a)} | {_md(p.student_b)} "
                f"| {100 * p.similarity_a:.0f}% / {100 * p.similarity_b:.0f}% | {p.tokens} |"
            )
        if len(rep.similar) > MAX_PAIRS_SHOWN:
            out.append(f"\n... and {len(rep.similar) - MAX_PAIRS_SHOWN} more in class-report.json")
    else:
        out.append(f"No pair above {100 * rep.threshold:.0f}%.")
    return out


def markdown(rep: ClassReport) -> str:
    out = [
        f"# Class report: {_md(rep.course)}",
        "",
        f"{rep.students} students graded; generated {rep.generated}.",
        "",
        "![score distribution](scores.png)",
        "",
        "## Scores",
        "",
        "| assignment | mean | median | min | max | could not be graded |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for a in rep.assignments:
        out.append(
            f"| {_md(a.assignment)} | {fraction(a.mean, a.max_score)} | {shown(a.median)} "
            f"| {shown(a.minimum)} | {shown(a.maximum)} | {a.errors} |"
        )
    ids = [a.assignment for a in rep.assignments]
    out += [
        "",
        "## Roster",
        "",
        "| student | " + " | ".join(_md(i) for i in ids) + " | total | report |",
        "|---|" + "---|" * len(ids) + "---:|---|",
    ]
    for row in rep.roster:
        cells = " | ".join(_cell(c) for c in row.cells)
        link = f"[report.html]({_md(row.report)})" if row.report else "–"
        out.append(f"| {_md(row.student)} | {cells} | {_total(row)} | {link} |")
    for title, rows, label in (
        ("Graded functions, hardest first", rep.functions, "function"),
        ("Tests, hardest first", rep.tests, "test"),
    ):
        out += [
            "",
            f"## {title}",
            "",
            f"| assignment | {label} | pass rate | passed | wrong | not attempted | skipped "
            "| commonest wrong answer |",
            "|---|---|---:|---:|---:|---:|---:|---|",
        ]
        for t in rows:
            common = (
                f"{_md(t.common_failure)} ({t.common_failure_count}x)" if t.common_failure else ""
            )
            out.append(
                f"| {_md(t.assignment)} | {_md(t.name)} | {_rate(t)} | {t.passed} | {t.failed} "
                f"| {t.not_attempted} | {t.skipped} | {common} |"
            )
    out += _md_changes_and_late(rep)
    out += _md_similar(rep)
    if rep.notes:
        out += ["", "## Notes", "", *[f"- {_md(n)}" for n in rep.notes]]
    return "\n".join(out) + "\n"


SIMILARITY_CAVEAT = (
    "Pairs whose graded cells share at least the threshold of their code (after the release's "
    "stubs and code most of the class shares are left out). Similar code has innocent causes: "
    "a hint, a worked example, a short correct answer, students who were allowed to work "
    "together. Read both submissions before drawing any conclusion."
)

_CSS = """
body{font:15px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;padding:0 1em}
table{border-collapse:collapse;margin:.5em 0 1.5em;width:100%}
th,td{border:1px solid #d0d7de;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.n{text-align:right;white-space:nowrap}
.bar{display:inline-block;height:.7em;background:#cf222e;vertical-align:middle;margin-right:.4em}
.bar.ok{background:#2da44e}.caveat{background:#fff8c5;border:1px solid #d4a72c;padding:.6em 1em}
code{font-size:90%;white-space:normal;overflow-wrap:anywhere}small{color:#57606a}
table.tests{table-layout:fixed}table.tests td{overflow-wrap:anywhere}
.lead{font-size:110%}details summary{cursor:pointer;margin:.5em 0}td.warn{background:#fff8c5}
"""
HARDEST_SHOWN = 15  # tests in the page's first table; the rest fold away


def _rate_table(p: Any, title: str, rows: list[PassRate], label: str) -> None:
    head = (
        "<table class=tests><colgroup><col style='width:11%'><col style='width:24%'>"
        "<col style='width:12%'><col style='width:6%'><col style='width:6%'>"
        "<col style='width:7%'><col style='width:6%'><col style='width:28%'></colgroup>"
        f"<tr><th>assignment<th>{label}<th>pass rate<th>passed<th>wrong<th>not attempted"
        "<th>skipped<th>commonest wrong answer</tr>"
    )
    p(f"<h2>{html_text(title)}</h2>{head}")
    for n, t in enumerate(rows):
        if n == HARDEST_SHOWN:
            p(f"</table><details><summary>all {len(rows)}</summary>{head}")
        width = 0 if t.pass_rate is None else round(60 * t.pass_rate)
        ok = " ok" if (t.pass_rate or 0) >= 0.8 else ""
        common = (
            f"<code>{html_text(t.common_failure)}</code> "
            f"<small>({t.common_failure_count}&times;)</small>"
            if t.common_failure
            else ""
        )
        p(
            f"<tr><td>{html_text(t.assignment)}<td>{html_text(t.name)}<td class=n>"
            f"<span class='bar{ok}' style='width:{width}px'></span>{html_text(_rate(t))}"
            f"<td class=n>{t.passed}<td class=n>{t.failed}<td class=n>{t.not_attempted}"
            f"<td class=n>{t.skipped}<td>{common}</tr>"
        )
    p("</table></details>" if len(rows) > HARDEST_SHOWN else "</table>")


def _html_changes_and_late(p: Any, rep: ClassReport) -> None:
    """The page's sections on outcomes the last regrade changed, late submissions and the
    staff's decisions."""
    p("<h2>Changed in the last regrade</h2>")
    if rep.changes:
        p("<table><tr><th>student<th>assignment<th>test<th>before<th>after</tr>")
        for c in rep.changes[:MAX_PAIRS_SHOWN]:
            p(
                f"<tr><td>{html_text(c.student)}<td>{html_text(c.assignment)}<td>{html_text(c.test)}"
                f"<td>{html_text(c.before)}<td>{html_text(c.after)}</tr>"
            )
        p("</table>")
    else:
        p("<p>No test changed its outcome.</p>")
    p("<h2>Late submissions</h2>")
    if rep.late:
        p("<table><tr><th>student<th>assignment<th>submitted<th>due<th>hours late<th>penalty</tr>")
        for x in rep.late:
            hours = "–" if x.hours_late is None else f"{x.hours_late:g}"
            due = f"{x.due} (extended)" if x.extended else x.due
            p(
                f"<tr><td>{html_text(x.student)}<td>{html_text(x.assignment)}"
                f"<td>{html_text(x.submitted or '–')}<td>{html_text(due)}"
                f"<td class=n>{html_text(hours)}<td class=n>{100 * x.penalty:.0f}%</tr>"
            )
        p("</table>")
    else:
        p("<p>None.</p>")
    p("<h2>Extensions and overrides</h2>")
    if rep.staff:
        p("<table><tr><th>student<th>assignment<th>kind<th>what</tr>")
        for d in rep.staff:
            p(
                f"<tr><td>{html_text(d.student)}<td>{html_text(d.assignment)}"
                f"<td>{html_text(d.kind)}<td>{html_text(d.what)}</tr>"
            )
        p("</table>")
    else:
        p("<p>None.</p>")


def _html_similar(p: Any, rep: ClassReport) -> None:
    """The page's section on similar pairs, with the caveat that it is not a verdict."""
    p("<h2>Similar graded cells <small>(for you to look at; not a verdict)</small></h2>")
    p(f"<p class=caveat>{html_text(SIMILARITY_CAVEAT)}</p>")
    if rep.similar:
        p(
            "<table><tr><th>assignment<th>student<th>student<th>share of each one's code"
            "<th>tokens</tr>"
        )
        for s in rep.similar[:MAX_PAIRS_SHOWN]:
            p(
                f"<tr><td>{html_text(s.assignment)}<td>{html_text(s.student_a)}<td>{html_text(s.student_b)}"
                f"<td class=n>{100 * s.similarity_a:.0f}% / {100 * s.similarity_b:.0f}%"
                f"<td class=n>{s.tokens}</tr>"
            )
        p("</table>")
        if len(rep.similar) > MAX_PAIRS_SHOWN:
            p(f"<p>... and {len(rep.similar) - MAX_PAIRS_SHOWN} more in class-report.json</p>")
    else:
        p(f"<p>No pair above {100 * rep.threshold:.0f}%.</p>")


def html(rep: ClassReport) -> str:
    rows: list[str] = []
    p = rows.append
    p("<!doctype html><html lang=en><head><meta charset=utf-8>")
    p("<meta name=viewport content='width=device-width,initial-scale=1'>")
    p(f"<title>Class report: {html_text(rep.course)}</title><style>{_CSS}</style></head><body>")
    p(f"<h1>Class report: {html_text(rep.course)}</h1>")
    mean = statistics.fmean(rep.scores.values()) if rep.scores else 0.0
    p(
        f"<p class=lead>{rep.students} students graded &middot; mean "
        f"{html_text(fraction(mean, rep.max_score))} &middot; {len(rep.late)} late &middot; "
        f"{len(rep.similar)} similar pairs to look at</p>"
        f"<p><small>generated {html_text(rep.generated)}</small></p>"
    )
    p("<img src='scores.png' alt='histogram of total scores' width=640 height=320>")
    p(
        "<h2>Scores</h2><table><tr><th>assignment<th>mean<th>median<th>min<th>max"
        "<th>could not be graded</tr>"
    )
    for a in rep.assignments:
        p(
            f"<tr><td>{html_text(a.assignment)}"
            f"<td class=n>{html_text(fraction(a.mean, a.max_score))}"
            f"<td class=n>{html_text(shown(a.median))}<td class=n>{html_text(shown(a.minimum))}"
            f"<td class=n>{html_text(shown(a.maximum))}<td class=n>{a.errors}</tr>"
        )
    p("</table><h2>Roster</h2><table><tr><th>student")
    p(
        "".join(f"<th>{html_text(a.assignment)}" for a in rep.assignments)
        + "<th>total<th>report</tr>"
    )
    for row in rep.roster:
        cells = "".join(
            f"<td class='n{' warn' if c.status != 'graded' else ''}'>{html_text(_cell(c))}"
            for c in row.cells
        )
        link = f"<a href='{html_text(row.report)}'>report</a>" if row.report else "–"
        p(
            f"<tr><td>{html_text(row.student)}{cells}"
            f"<td class=n>{html_text(_total(row))}<td>{link}</tr>"
        )
    p("</table>")
    for title, rates, label in (
        ("Graded functions, hardest first", rep.functions, "function"),
        ("Tests, hardest first", rep.tests, "test"),
    ):
        _rate_table(p, title, rates, label)
    _html_changes_and_late(p, rep)
    _html_similar(p, rep)
    if rep.notes:
        p("<h2>Notes</h2><ul>" + "".join(f"<li>{html_text(n)}" for n in rep.notes) + "</ul>")
    p("</body></html>")
    return "\n".join(rows) + "\n"


def terminal_summary(rep: ClassReport, hardest: int = 10) -> str:
    """A few plain-text tables for the terminal (the page and summary.md have everything)."""

    parts = [
        format_table(
            ["assignment", "mean", "median", "min", "max"],
            [
                [a.assignment, fraction(a.mean, a.max_score), a.median, a.minimum, a.maximum]
                for a in rep.assignments
            ],
        ),
        f"\nhardest {min(hardest, len(rep.tests))} of {len(rep.tests)} tests:",
        format_table(
            ["test", "pass rate", "commonest failure"],
            [
                [f"{t.assignment}::{t.name}"[:70], _rate(t), t.common_failure[:60]]
                for t in rep.tests[:hardest]
            ],
        ),
        f"\nlate submissions (student, assignment): {len(rep.late)}",
        f"extensions and overrides: {len(rep.staff)}",
        f"similar pairs to look at (>= {100 * rep.threshold:.0f}% shared, not a verdict): "
        f"{len(rep.similar)}",
    ]
    if rep.similar:
        parts.append(
            format_table(
                ["assignment", "student", "student", "shared"],
                [
                    [
                        p.assignment,
                        p.student_a,
                        p.student_b,
                        f"{100 * p.similarity_a:.0f}% / {100 * p.similarity_b:.0f}%",
                    ]
                    for p in rep.similar[:hardest]
                ],
            )
        )
    return "\n".join(parts)


def write_class_report(
    graded: Path,
    course: Course,
    state: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    out: Path | None = None,
    submissions: dict[str, Path] | None = None,
    threshold: float | None = None,
) -> tuple[ClassReport, dict[str, Path]]:
    """Build the report over the graded batch in `graded` and write it (default
    `graded/class-report/`); returns the report and the paths written.

    `state` is grade-all's state (`StateFile(graded / STATE).read()`): where each submission
    was, for the similarity; `submissions` ({student: folder}) replaces it when given.
    """
    graded = Path(graded)
    if not graded.is_dir():
        raise UsageError(f"{graded}: not a folder; give the --out folder of `grader grade-all`")
    folders = submissions if submissions is not None else submission_paths(state or {})
    folder = Path(out) if out is not None else graded / REPORT_DIR
    rep = build(
        graded,
        course,
        folders,
        THRESHOLD if threshold is None else threshold,
        known=sorted(state or {}),
        report_dir=folder,
    )
    if rep.students == 0:
        raise UsageError(f"{graded}: no <student>/result.json found; run `grader grade-all` first")
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    png = histogram_png(rep.scores.values(), rep.max_score)
    rep.seconds["plot"] = round(time.perf_counter() - t0, 3)
    paths = {
        "html": folder / "index.html",
        "markdown": folder / "summary.md",
        "png": folder / "scores.png",
        "json": folder / "class-report.json",
    }
    atomic_write(paths["png"], png)
    atomic_write(paths["html"], html(rep))
    atomic_write(paths["markdown"], markdown(rep))
    atomic_write(paths["json"], json.dumps(rep.to_dict(), indent=2, sort_keys=True) + "\n")
    return rep, paths
