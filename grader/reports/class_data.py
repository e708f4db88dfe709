"""The class report as data: a graded batch read, counted and compared (rendered by class_report).

`build` reads `graded/<student>/result.json` (a result that does not validate is a note, not an
error), and computes

- per assignment the mean, median, min and max score, and how many could not be graded;
- every test's pass rate, hardest first, with its commonest failure message (messages are grouped
  with their numbers masked, so "got 12.5" and "got 7" count as one; one real message is shown);
- late submissions (an assignment with a late penalty, or a trusted timestamp after its due date);
- the similar pairs of graded cells (grader.reports.similarity), from each student's submission
  folder as grade-all recorded it in its state (`submission_paths`) or as the caller lists them.

Everything here is linear in the submissions apart from sorting (n log n) and the similarity's
candidate pairs. The result is schema-versioned (`SCHEMA_VERSION`) as class-report.json.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from grader.core.course import Course
from grader.core.points import stored
from grader.core.results import GradeResult, validate
from grader.reports.common import FAILING
from grader.reports.similarity import (
    THRESHOLD,
    SimilarPair,
    class_sources,
    release_stub,
    similar_pairs,
)

SCHEMA_VERSION = 1
MESSAGE_CHARS = 160
_NUMBER_RE = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


@dataclass
class PassRate:
    assignment: str
    name: str
    max_score: float
    passed: int = 0
    failed: int = 0  # failed, error or timeout
    skipped: int = 0
    common_failure: str = ""
    common_failure_count: int = 0

    @property
    def attempted(self) -> int:
        return self.passed + self.failed

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.attempted if self.attempted else None


@dataclass
class AssignmentStat:
    assignment: str
    max_score: float
    mean: float
    median: float
    minimum: float
    maximum: float
    errors: int  # students whose assignment could not be graded (no notebook, unreadable...)


@dataclass
class LateRow:
    student: str
    assignment: str
    submitted: str | None
    due: str
    hours_late: float | None
    penalty: float  # fraction of the raw score taken off


@dataclass
class ClassReport:
    course: str
    generated: str
    students: int
    max_score: float
    scores: dict[str, float]
    assignments: list[AssignmentStat]
    tests: list[PassRate]
    late: list[LateRow]
    similar: list[SimilarPair]
    threshold: float
    similarity: dict[str, dict[str, int]]  # per assignment: how many compared, dropped, unread
    notes: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict:
        data = asdict(self)
        for t, raw in zip(self.tests, data["tests"], strict=True):
            raw["pass_rate"] = t.pass_rate
        return data


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


def pass_rates(results: dict[str, GradeResult]) -> list[PassRate]:
    """One row per test, hardest first (lowest pass rate; never-attempted tests last)."""
    stats: dict[tuple[str, str], PassRate] = {}
    failures: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    example: dict[tuple[str, str, str], str] = {}
    for r in results.values():
        for a in r.assignments:
            for t in a.tests:
                key = (a.id, t.name)
                s = stats.setdefault(key, PassRate(a.id, t.name, float(t.max_score)))
                if t.outcome == "passed":
                    s.passed += 1
                elif t.outcome in FAILING:
                    s.failed += 1
                    msg = _message(t.feedback)
                    shape = _NUMBER_RE.sub("#", msg)
                    failures[key][shape] += 1
                    example.setdefault((*key, shape), msg)
                else:
                    s.skipped += 1
    for key, s in stats.items():
        if failures[key]:
            shape, count = min(failures[key].items(), key=lambda kv: (-kv[1], kv[0]))
            s.common_failure, s.common_failure_count = example[(*key, shape)], count
    return sorted(
        stats.values(),
        key=lambda s: (s.pass_rate is None, s.pass_rate or 0.0, s.assignment, s.name),
    )


def assignment_stats(results: dict[str, GradeResult], course: Course) -> list[AssignmentStat]:
    """Per assignment of the course: mean, median, min and max score (shown precision)."""
    out = []
    for aid in course.assignment_ids:
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
                sum(a.error is not None and not a.tests for a in rows),
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
                    )
                )
    return sorted(rows, key=lambda x: (x.assignment, -(x.hours_late or 0.0), x.student))


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
) -> ClassReport:
    """Everything the report shows, as data; `submissions` are the folders compared."""
    t0, c0 = time.perf_counter(), time.process_time()
    results, notes = load_results(graded)
    t1, c1 = time.perf_counter(), time.process_time()
    tests = pass_rates(results)
    late = late_rows(results, course)
    stats = assignment_stats(results, course)
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
        tests=tests,
        late=late,
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
