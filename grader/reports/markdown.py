"""The markdown report: the PR comment and the job summary (GitHub-flavoured markdown).

Student text reaches it only through `grader.reports.escape` (once). Identical feedback of
several tests is one entry that lists them, and the whole body stays under GitHub's 65,536
character comment limit whatever the feedback size.
"""

from __future__ import annotations

from grader.core.course import Course
from grader.core.feedback import FEEDBACK_CHARS
from grader.core.points import fraction, shown
from grader.core.results import AssignmentResult, GradeResult, TestResult
from grader.reports import common, memory
from grader.reports.escape import md_block, md_inline

BODY_BYTES = 60_000  # GitHub rejects comments over 65,536 characters; keep a margin (in bytes)
MAX_WARNINGS = 50
LISTED_TESTS = 40  # names listed under one folded feedback entry


def _one(text: str, limit: int = common.NAME_CHARS) -> str:
    return md_inline(text, limit)


def _feedback_entries(tests: list[TestResult]) -> list[str]:
    """One block per distinct feedback (listing its tests), then failing tests with none."""
    blocks = []
    for fb in common.fold_feedback(tests):
        first = fb.tests[0]
        if len(fb.tests) == 1:
            head = (
                f"**{common.EMOJI.get(first.outcome, '?')} {_one(first.name)}** "
                f"({_one(first.outcome)}, {fraction(first.score, first.max_score)})"
            )
        else:
            outcomes = sorted({t.outcome for t in fb.tests})
            icon = common.EMOJI.get(outcomes[0], "?") if len(outcomes) == 1 else "❗"
            got = sum(t.score for t in fb.tests)
            top = sum(t.max_score for t in fb.tests)
            names = ", ".join(_one(t.name) for t in fb.tests[:LISTED_TESTS])
            if len(fb.tests) > LISTED_TESTS:
                names += f" and {len(fb.tests) - LISTED_TESTS} more"
            head = (
                f"**{icon} {len(fb.tests)} tests got the same feedback** "
                f"({_one(', '.join(outcomes))}, {fraction(got, top)}): {names}"
            )
        blocks.append(f"{head}\n\n{md_block(fb.text, FEEDBACK_CHARS)}")
    for t in tests:
        if not t.feedback and t.outcome in common.FAILING:
            blocks.append(
                f"**{common.EMOJI.get(t.outcome, '?')} {_one(t.name)}** "
                f"({_one(t.outcome)}, {fraction(t.score, t.max_score)})\n\n_no feedback_"
            )
    return blocks


def _assignment(a: AssignmentResult, course: Course) -> list[str]:
    """Blocks (each valid markdown on its own) for one assignment."""
    blocks: list[str] = []
    head = (
        f"### {_one(common.title(course, a.id))} ({_one(a.id)}): {fraction(a.score, a.max_score)}"
    )
    if a.late_penalty:
        head += (
            f"\n\n⏰ Late penalty: **{a.late_penalty * 100:.0f}%** of "
            f"{shown(a.raw_score)} points taken off."
        )
    for note in common.notes(a):
        head += f"\n\n📌 {_one(note, common.WARNING_CHARS)}"
    if a.error:
        error = md_block(a.error, FEEDBACK_CHARS)
        head += f"\n\n💥 **This assignment could not be graded:**\n\n{error}"
    blocks.append(head)
    not_passed = [t for t in common.failing_first(a.tests) if t.outcome != "passed"]
    passed = [t for t in a.tests if t.outcome == "passed"]
    if not a.tests:
        blocks.append("_No tests ran._")
    elif not_passed:
        rows = ["| | Test | Points | Outcome |", "|---|---|---:|---|"]
        rows += [
            f"| {common.EMOJI.get(t.outcome, '?')} | {_one(t.name)} "
            f"| {fraction(t.score, t.max_score)} | {_one(t.outcome)} |"
            for t in not_passed
        ]
        blocks.append("\n".join(rows))
    else:
        blocks.append(f"✅ All {len(passed)} tests passed.")
    blocks.extend(_feedback_entries(not_passed))
    profiles = memory.markdown(a.memory, course.gpu.bandwidth_gbs, course.gpu.name)
    if profiles:
        blocks.append(profiles)
    if passed:
        rows = ["| | Test | Points |", "|---|---|---:|"]
        rows += [
            f"| {common.EMOJI['passed']} | {_one(t.name)} | {fraction(t.score, t.max_score)} |"
            for t in passed
        ]
        got = sum(t.score for t in passed)
        top = sum(t.max_score for t in passed)
        blocks.append(
            f"<details><summary>{len(passed)} passed tests ({fraction(got, top)} points)</summary>"
            f"\n\n" + "\n".join(rows) + "\n\n</details>"
        )
    return blocks


def markdown(result: GradeResult, course: Course, limit: int = BODY_BYTES) -> str:
    """The PR comment / job summary. At most `limit` UTF-8 bytes, whatever the feedback size."""
    icon = "✅" if result.max_score and result.score >= result.max_score else "📝"
    header = [
        f"## {icon} {_one(course.title)}: {fraction(result.score, result.max_score)} "
        f"({common.pct(result.score, result.max_score)})",
        f"Student: **{_one(result.student)}**"
        + (f" · submitted {_one(result.timestamp)}" if result.timestamp else ""),
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
            f"| {_one(a.id)} | {fraction(a.score, a.max_score)} | {late} | {_one(status)} |"
        )
    header.append("\n".join(summary))
    if result.environment.not_authoritative:
        header.insert(1, f"> **⚠️ {_one(result.environment.not_authoritative, 600)}**")
    if result.warnings:
        listed = result.warnings[:MAX_WARNINGS]
        lines = ["**⚠️ Warnings**", ""] + [f"- {_one(w, common.WARNING_CHARS)}" for w in listed]
        if len(result.warnings) > len(listed):
            lines.append(f"- … and {len(result.warnings) - len(listed)} more")
        header.append("\n".join(lines))

    footer = f"<sub>{_one(common.env_line(result), 1000)}</sub>"
    body: list[str] = []
    for a in result.assignments:
        body.extend(_assignment(a, course))

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
