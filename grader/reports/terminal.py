"""What the CLI prints: plain-text tables of results, for a terminal (and a CI log).

Feedback in `grader check`'s table is one line per test (a long first line is cut at
`CHECK_FEEDBACK_CHARS`); `-v` shows whole messages. Scores use the one points format. Student
text (feedback, errors, warnings, file names) goes through `grader.reports.escape.visible`
first: a colour code, a bidi override or a lone surrogate can neither spoof the table nor stop
the print.
"""

from __future__ import annotations

from collections.abc import Sequence

from grader.core.results import AssignmentResult, GradeResult
from grader.core.tables import format_table, points
from grader.grading.check import Checked
from grader.reports import memory
from grader.reports.common import notes
from grader.reports.escape import visible

CHECK_FEEDBACK_CHARS = 100
OUTCOMES = ("passed", "failed", "error", "timeout", "skipped")


def assignment_table(results: Sequence[AssignmentResult]) -> str:
    """One row per assignment: score, counts per outcome and the assignment's error."""
    rows = []
    for r in results:
        counts = [sum(t.outcome == o for t in r.tests) for o in OUTCOMES]
        rows.append([r.id, points(r.score, r.max_score), *counts, visible(r.error or "")])
    return format_table(["assignment", "score", *OUTCOMES, "note"], rows)


def one_line(text: str, verbose: bool) -> str:
    """A feedback message as `grader check` shows it: its first line, cut, unless verbose."""
    if verbose or not text:
        return text or ""
    first = text.splitlines()[0]
    cut = len(first) > CHECK_FEEDBACK_CHARS or "\n" in text.strip()
    return first[: CHECK_FEEDBACK_CHARS - 1] + "…" if cut else first


def check_report(checked: Sequence[Checked], verbose: bool) -> str:
    """Each assignment's tests, then the assignment table, then a hint when feedback was cut."""
    out, cut = [], False
    for c in checked:
        out.append(f"\n{c.result.id} (checked {visible(c.notebook)})")
        rows = []
        for t in c.result.tests:
            shown = visible(t.feedback or "")
            fb = one_line(shown, verbose)
            cut |= fb != shown
            rows.append([visible(t.name), points(t.score, t.max_score), t.outcome, fb])
        out.append(format_table(["test", "points", "outcome", "feedback"], rows))
        out += [f"warning: {visible(w)}" for w in c.warnings]
        if c.memory:
            out.append("memory (grader profile shows each kernel in full):")
            out += [f"  {memory.summary(k)}" for k in c.memory]
    out += ["", assignment_table([c.result for c in checked])]
    notes = dict.fromkeys(n for c in checked for n in c.notes)  # each said once, in order
    out += [f"\nnote: {n}" for n in notes]
    if cut:
        out.append("\n(feedback shortened to one line; `grader check -v` shows whole messages)")
    return "\n".join(out)


def grade_summary(result: GradeResult) -> str:
    """The assignment table and the total line `grader grade` prints."""
    env = result.environment
    said = [f"note: {a.id}: {visible(n)}" for a in result.assignments for n in notes(a)]
    return (
        assignment_table(result.assignments)
        + "".join(f"\n{line}" for line in said)
        + f"\n\ntotal {points(result.score, result.max_score)}  ({result.duration_s:.1f} s, "
        f"{env.device}, isolation: {', '.join(env.isolation) or 'none'})"
    )
