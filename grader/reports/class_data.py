"""The class report as data: a graded batch read, counted and compared (rendered by class_report).

`build` reads `graded/<student>/result.json` (a result that does not validate is a note, not an
error), and computes

- a roster: one row per student (every student grade-all knows of, with or without a result),
  with their score and status per assignment (graded, late, notebook missing, does not parse,
  could not be graded, not authoritative, no result) and a link to their report.html;
- per assignment the mean, median, min and max score, and how many could not be graded (any
  assignment-wide error, and students with no result at all);
- every test's pass rate, hardest first, parametrized cases folded into their test (a student
  passes it when every case passes), "not attempted" (the untouched stub) apart from "wrong",
  with the commonest wrong answer (messages are grouped with their numbers masked, so "got 12.5"
  and "got 7" count as one; one real message is shown);
- the same per graded function of the reference solution (each test counted for the longest
  function name it names);
- the tests whose outcome changed in the last regrade (`result.previous.json`, which grade-all
  keeps beside each regraded result);
- late submissions (an assignment with a late penalty, or a trusted timestamp after its due date,
  the student's extended one when they have an extension);
- the staff's decisions the results carry: each extension and each override with its reason;
- the similar pairs of graded cells (grader.reports.similarity), from each student's submission
  folder as grade-all recorded it in its state (`submission_paths`) or as the caller lists them.

Everything here is linear in the submissions apart from sorting (n log n) and the similarity's
candidate pairs. The result is schema-versioned (`SCHEMA_VERSION`) as class-report.json.
"""

from __future__ import annotations

import ast
import json
import os
import re
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from grader.core.course import Course
from grader.core.points import shown, stored
from grader.core.results import GradeResult, validate
from grader.core.stubs import is_stub_feedback
from grader.reports.common import FAILING
from grader.reports.similarity import (
    THRESHOLD,
    SimilarPair,
    class_sources,
    release_stub,
    similar_pairs,
)

SCHEMA_VERSION = 3  # 3: `staff` (extensions, overrides); LateRow.extended
MESSAGE_CHARS = 160
_NUMBER_RE = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


@dataclass
class PassRate:
    assignment: str
    name: str
    max_score: float
    passed: int = 0
    failed: int = 0  # wrong: failed, error or timeout with the stub filled in
    skipped: int = 0
    not_attempted: int = 0  # failed because the graded function is still the release's stub
    common_failure: str = ""
    common_failure_count: int = 0

    @property
    def attempted(self) -> int:
        return self.passed + self.failed + self.not_attempted

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.attempted if self.attempted else None


@dataclass
class RosterCell:
    assignment: str
    score: float | None
    max_score: float
    status: str  # one of STATUSES


@dataclass
class RosterRow:
    student: str
    score: float | None
    max_score: float
    cells: list[RosterCell]
    report: str  # the student's report.html, relative to the class report's folder ("": none)


@dataclass
class OutcomeChange:
    student: str
    assignment: str
    test: str
    before: str
    after: str


@dataclass
class AssignmentStat:
    assignment: str
    max_score: float
    mean: float
    median: float
    minimum: float
    maximum: float
    errors: int  # students whose assignment could not be graded (no notebook, no result...)


@dataclass
class LateRow:
    student: str
    assignment: str
    submitted: str | None
    due: str  # the student's: the extended due date when they have an extension
    hours_late: float | None
    penalty: float  # fraction of the raw score taken off
    extended: bool = False


@dataclass
class StaffRow:
    """One decision of the staff's a result carries: an extension, or an override."""

    student: str
    assignment: str
    kind: str  # "extension", "override"
    what: str  # the extended due date; the points, what they replace and the reason


@dataclass
class ClassReport:
    course: str
    generated: str
    students: int
    max_score: float
    scores: dict[str, float]
    assignments: list[AssignmentStat]
    roster: list[RosterRow]
    tests: list[PassRate]
    functions: list[PassRate]  # `name` is the graded function
    changes: list[OutcomeChange]
    late: list[LateRow]
    staff: list[StaffRow]
    similar: list[SimilarPair]
    threshold: float
    similarity: dict[str, dict[str, int]]  # per assignment: how many compared, dropped, unread
    notes: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict:
        data = asdict(self)
        for key in ("tests", "functions"):
            for t, raw in zip(getattr(self, key), data[key], strict=True):
                raw["pass_rate"] = t.pass_rate
        return data


STATUSES = (
    "graded",
    "late",
    "not authoritative",
    "notebook missing",
    "does not parse",
    "could not be graded",
    "no result",
)


# ----------------------------------------------------------------------------- inputs


def load_results(graded: Path) -> tuple[dict[str, GradeResult], list[str]]:
    """{student: result} from `graded/<student>/result.json`, and a note per unreadable one."""
    results: dict[str, GradeResult] = {}
    notes: list[str] = []
    for path in sorted(Path(graded).glob("*/result.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            validate(data)
            r = GradeResult.from_dict(data)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            notes.append(f"{path}: not a readable result ({exc}); left out of the report")
            continue
        results[path.parent.name] = r
    return results, notes


def submission_paths(state: Mapping[str, Mapping[str, Any]]) -> dict[str, Path]:
    """{student: submission folder} from grade-all's state entries (`StateFile.read()`)."""
    out: dict[str, Path] = {}
    for student, entry in state.items():
        where = entry.get("submission")
        if isinstance(where, str) and where:
            out[student] = Path(where)
    return out


# ----------------------------------------------------------------------------- statistics


def _message(feedback: str) -> str:
    first = next((line.strip() for line in (feedback or "").splitlines() if line.strip()), "")
    return first[:MESSAGE_CHARS] if first else "(no message)"


def base_name(test: str) -> str:
    """A parametrized case's test: `hidden/test_sizes[257]` -> `hidden/test_sizes`."""
    return test.split("[", 1)[0]


def _student_outcome(cases: list[Any]) -> tuple[str, str]:
    """One student's outcome over a test's cases: passed / not attempted / wrong / skipped, and
    the message of the first failing case."""
    failing = [t for t in cases if t.outcome in FAILING]
    if not failing:
        return ("skipped", "") if all(t.outcome == "skipped" for t in cases) else ("passed", "")
    first = failing[0].feedback
    if all(is_stub_feedback(t.feedback) for t in failing):
        return "not attempted", first
    return "wrong", next((t.feedback for t in failing if not is_stub_feedback(t.feedback)), first)


def _rates(results: dict[str, GradeResult], group: Any) -> list[PassRate]:
    """One row per group (`group(assignment, test name) -> name`), counted once per student."""
    stats: dict[tuple[str, str], PassRate] = {}
    failures: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    example: dict[tuple[str, str, str], str] = {}
    for r in results.values():
        for a in r.assignments:
            cases: dict[str, list[Any]] = defaultdict(list)
            for t in a.tests:
                cases[group(a.id, t.name)].append(t)
            for name, mine in cases.items():
                key = (a.id, name)
                s = stats.setdefault(key, PassRate(a.id, name, 0.0))
                s.max_score = max(s.max_score, stored(sum(t.max_score for t in mine)))
                outcome, feedback = _student_outcome(mine)
                if outcome == "passed":
                    s.passed += 1
                elif outcome == "skipped":
                    s.skipped += 1
                elif outcome == "not attempted":
                    s.not_attempted += 1
                else:
                    s.failed += 1
                    msg = _message(feedback)
                    shape = _NUMBER_RE.sub("#", msg)
                    failures[key][shape] += 1
                    example.setdefault((*key, shape), msg)
    for key, s in stats.items():
        if failures[key]:
            shape, count = min(failures[key].items(), key=lambda kv: (-kv[1], kv[0]))
            s.common_failure, s.common_failure_count = example[(*key, shape)], count
    return sorted(
        stats.values(),
        key=lambda s: (s.pass_rate is None, s.pass_rate or 0.0, s.assignment, s.name),
    )


def pass_rates(results: dict[str, GradeResult]) -> list[PassRate]:
    """One row per test (its parametrized cases folded), hardest first; never-attempted last."""
    return _rates(results, lambda _a, name: base_name(name))


def graded_functions(course: Course) -> dict[str, list[str]]:
    """{assignment: the top-level functions of its reference solution}, longest name first."""
    out: dict[str, list[str]] = {}
    for aid in course.assignment_ids:
        path = course.root / "solutions" / aid / f"{aid}.py"
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            out[aid] = []
            continue
        names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        out[aid] = sorted(names, key=lambda n: (-len(n), n))
    return out


def function_of(test: str, functions: list[str]) -> str:
    """The graded function a test is about: the longest function name in the test's name
    (`hidden/test_gpu_vector_add_...` -> `gpu_vector_add`), else the test itself."""
    name = base_name(test).rsplit("/", 1)[-1].removeprefix("test_")
    for f in functions:
        if f in name:
            return f
    return base_name(test)


def function_rates(results: dict[str, GradeResult], course: Course) -> list[PassRate]:
    """The pass rates per graded function: a student passes a function when every test of it
    passes."""
    functions = graded_functions(course)
    return _rates(results, lambda aid, name: function_of(name, functions.get(aid, [])))


def status_of(a: Any, r: GradeResult) -> str:
    """One assignment's status in the roster."""
    if a.error is not None:
        text = a.error.lower()
        if "no notebook" in text or "missing" in text or "not found" in text:
            return "notebook missing"
        if any(w in text for w in ("parse", "not valid", "corrupt", "json", "unreadable")):
            return "does not parse"
        return "could not be graded"
    if r.environment.not_authoritative:
        return "not authoritative"
    return "late" if a.late_penalty > 0 else "graded"


def roster(
    results: dict[str, GradeResult],
    course: Course,
    known: Sequence[str],
    graded: Path,
    report_dir: Path,
) -> list[RosterRow]:
    """One row per student of `results` and of `known` (students grade-all listed)."""
    rows = []
    for student in sorted(set(results) | set(known)):
        r = results.get(student)
        by_id = {a.id: a for a in r.assignments} if r is not None else {}
        cells = []
        for aid in course.assignment_ids:
            a = by_id.get(aid)
            top = float(course.assignment(aid).points)
            if r is None or a is None:
                cells.append(RosterCell(aid, None, top, "no result"))
            else:
                cells.append(RosterCell(aid, a.score, a.max_score, status_of(a, r)))
        page = Path(graded) / student / "report.html"
        link = os.path.relpath(page, report_dir) if page.is_file() else ""
        rows.append(
            RosterRow(
                student,
                r.score if r is not None else None,
                r.max_score if r is not None else float(sum(c.max_score for c in cells)),
                cells,
                Path(link).as_posix() if link else "",
            )
        )
    return rows


def outcome_changes(graded: Path, results: dict[str, GradeResult]) -> list[OutcomeChange]:
    """Tests whose outcome differs between a student's `result.previous.json` and result.json."""
    changes = []
    for student, r in sorted(results.items()):
        path = Path(graded) / student / "result.previous.json"
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            validate(data)
            before = GradeResult.from_dict(data)
        except (OSError, ValueError, TypeError, KeyError):
            continue
        old = {(a.id, t.name): t.outcome for a in before.assignments for t in a.tests}
        for a in r.assignments:
            for t in a.tests:
                was = old.get((a.id, t.name))
                if was is not None and was != t.outcome:
                    changes.append(OutcomeChange(student, a.id, t.name, was, t.outcome))
    return changes


def assignment_stats(
    results: dict[str, GradeResult], course: Course, known: Sequence[str] = ()
) -> list[AssignmentStat]:
    """Per assignment of the course: mean, median, min and max score of those graded, and how
    many could not be graded (an assignment-wide error, or no result at all)."""
    out = []
    for aid in course.assignment_ids:
        missing = sum(
            1
            for s in set(results) | set(known)
            if s not in results or all(a.id != aid for a in results[s].assignments)
        )
        rows = [a for r in results.values() for a in r.assignments if a.id == aid]
        scores = [a.score for a in rows] or [0.0]
        top = max((a.max_score for a in rows), default=float(course.assignment(aid).points))
        out.append(
            AssignmentStat(
                aid,
                float(top),
                round(statistics.fmean(scores), 2),  # statistics, not scores: 2 decimals
                round(statistics.median(scores), 2),
                stored(min(scores)),
                stored(max(scores)),
                sum(a.error is not None for a in rows) + missing,
            )
        )
    return out


def late_rows(results: dict[str, GradeResult], course: Course) -> list[LateRow]:
    """Assignments handed in late: a late penalty applied, or a timestamp after the due date."""
    rows = []
    for student, r in results.items():
        submitted = _parse_time(r.timestamp)
        for a in r.assignments:
            try:
                due = course.assignment(a.id).due
            except (KeyError, ValueError):
                continue
            due = _parse_time(a.extended_due) or due
            after = submitted is not None and submitted > due
            if a.late_penalty > 0 or after:
                hours = (submitted - due).total_seconds() / 3600 if submitted else None
                rows.append(
                    LateRow(
                        student,
                        a.id,
                        r.timestamp,
                        due.isoformat(),
                        round(hours, 1) if hours is not None else None,
                        float(a.late_penalty),
                        a.extended_due is not None,
                    )
                )
    return sorted(rows, key=lambda x: (x.assignment, -(x.hours_late or 0.0), x.student))


def staff_rows(results: dict[str, GradeResult]) -> list[StaffRow]:
    """Every extension and override the results carry, by student and assignment."""
    rows = []
    for student, r in sorted(results.items()):
        for a in r.assignments:
            if a.extended_due:
                rows.append(StaffRow(student, a.id, "extension", f"due {a.extended_due}"))
            overridden = [("score", a.override)] if a.override else []
            overridden += [(t.name, t.override) for t in a.tests if t.override]
            for what, o in overridden:
                rows.append(
                    StaffRow(
                        student,
                        a.id,
                        "override",
                        f"{what}: {shown(o['points'])} (graded {shown(o['auto_score'])}) by "
                        f"{o['by']} at {o['at']}: {o['reason']}",
                    )
                )
    return rows


def _parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo is not None else None


# ----------------------------------------------------------------------------- build


def build(
    graded: Path,
    course: Course,
    submissions: dict[str, Path],
    threshold: float = THRESHOLD,
    *,
    known: Sequence[str] = (),
    report_dir: Path | None = None,
) -> ClassReport:
    """Everything the report shows, as data; `submissions` are the folders compared, `known`
    every student grade-all listed (so one with no result.json still has a roster row)."""
    t0, c0 = time.perf_counter(), time.process_time()
    results, notes = load_results(graded)
    t1, c1 = time.perf_counter(), time.process_time()
    tests = pass_rates(results)
    stats = assignment_stats(results, course, list(known))
    rows = roster(results, course, list(known), graded, report_dir or Path(graded))
    t2, c2 = time.perf_counter(), time.process_time()
    similar: list[SimilarPair] = []
    sim_info: dict[str, dict[str, int]] = {}
    for aid in course.assignment_ids:
        sources, missing = class_sources(results, submissions, aid)
        pairs, info = similar_pairs(sources, release_stub(course.root, aid), aid, threshold)
        if missing:
            info["unreadable"] = len(missing)
        sim_info[aid] = info
        similar += pairs
    if not submissions:
        notes.append(
            "no submission folders known (state.jsonl has none): similarity was not computed; "
            "pass --submissions"
        )
    t3, c3 = time.perf_counter(), time.process_time()
    max_score = max((r.max_score for r in results.values()), default=0.0)
    return ClassReport(
        course=course.title,
        generated=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        students=len(results),
        max_score=float(max_score),
        scores={s: float(r.score) for s, r in sorted(results.items())},
        assignments=stats,
        roster=rows,
        tests=tests,
        functions=function_rates(results, course),
        changes=outcome_changes(graded, results),
        late=late_rows(results, course),
        staff=staff_rows(results),
        similar=similar,
        threshold=threshold,
        similarity=sim_info,
        notes=notes,
        seconds={  # wall, and this process's CPU (steadier on a loaded machine)
            "read": round(t1 - t0, 3),
            "statistics": round(t2 - t1, 3),
            "similarity": round(t3 - t2, 3),
            "read_cpu": round(c1 - c0, 3),
            "statistics_cpu": round(c2 - c1, 3),
            "similarity_cpu": round(c3 - c2, 3),
        },
    )
