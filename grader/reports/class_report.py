"""The class report: where a class struggles, after `grader grade-all`.

`grader class-report OUT` reads a graded batch (OUT is grade-all's `--out`: `<student>/result.json`
and `state.jsonl`) and writes `OUT/class-report/`: `index.html`, `summary.md`, `scores.png` and
`class-report.json` (the data, schema-versioned). It shows

- the score distribution (a histogram of total scores, and per assignment mean/median/min/max);
- every test's pass rate, hardest first, with its commonest failure message (messages are grouped
  with their numbers masked, so "got 12.5" and "got 7" count as one; one real message is shown);
- late submissions (an assignment with a late penalty, or a trusted timestamp after its due date);
- the similarity of the graded cells across students: pairs above a threshold are listed for the
  instructor to look at. It is never a verdict: shared starter code, a hint from the course or a
  short correct answer look alike; the page says so.

Similarity. The graded cells (nbgrader `solution: true`) of the notebook each student was graded
on are fingerprinted with copydetect's pieces (its Pygments filter, so that renaming variables
changes nothing and comments and docstrings are dropped; its winnowing of k-grams, noise
threshold 25 tokens, guarantee 30; its `compare_files` for a pair's shared share), with one
change: k-grams are hashed with blake2b rather than Python's `hash`, which is salted per process
and would make the same class come out a few percent different on every run. The release's
own stub cells are its boilerplate, and, as MOSS's `-m` does, a fingerprint found in more than
max(10, 10% of the class) submissions is common knowledge and dropped too, so an idiom everyone
writes does not link everyone. Pairs are found through an inverted index from fingerprint to
submissions, so only submissions that share a fingerprint are compared: the work grows with the
pairs that share code (at most the common-fingerprint cut squared per fingerprint), not with all
n^2 pairs. Everything else in the report is linear in the submissions, apart from sorting
(n log n).

Submissions are untrusted: their sources are read without following links and up to the intake's
notebook size cap, and every student-controlled text is escaped in both outputs.
"""

from __future__ import annotations

import hashlib
import html as _html
import io
import json
import re
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

from grader.core.files import atomic_write
from grader.core.points import fraction, rounded, shown
from grader.core.course import Course
from grader.core.results import GradeResult, validate

SCHEMA_VERSION = 1
REPORT_DIR = "class-report"
THRESHOLD = 0.6  # a pair is listed when either side has this fraction of its code in common
NOISE_T = 25  # copydetect: matches shorter than this (in tokens) are ignored
GUARANTEE_T = 30  # copydetect: matches at least this long are always found
COMMON_MIN = 10  # a fingerprint in more submissions than max(COMMON_MIN, COMMON_FRACTION x n)
COMMON_FRACTION = 0.10  # is common knowledge (MOSS's -m) and is not evidence of anything
MAX_PAIRS_SHOWN = 100
MESSAGE_CHARS = 160
FAILED = ("failed", "error", "timeout")
_NUMBER_RE = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


# ----------------------------------------------------------------------------- data


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
class SimilarPair:
    assignment: str
    student_a: str
    student_b: str
    similarity_a: float  # fraction of a's graded code found in b's
    similarity_b: float
    tokens: int  # overlapping tokens


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


def submission_paths(graded: Path) -> dict[str, Path]:
    """{student: submission folder} as grade-all recorded them in `state.jsonl`."""
    from grader.batch import STATE, StateFile

    out: dict[str, Path] = {}
    for student, entry in StateFile(Path(graded) / STATE).read().items():
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
                elif t.outcome in FAILED:
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
    out = []
    for aid in course.assignment_ids:
        rows = [a for r in results.values() for a in r.assignments if a.id == aid]
        scores = [a.score for a in rows] or [0.0]
        top = max((a.max_score for a in rows), default=float(course.assignment(aid).points))
        out.append(
            AssignmentStat(
                aid,
                float(top),
                rounded(statistics.fmean(scores)),
                rounded(statistics.median(scores)),
                rounded(min(scores)),
                rounded(max(scores)),
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


# ----------------------------------------------------------------------------- similarity


def graded_cells(path: Path) -> str | None:
    """The code of the cells a student fills in (nbgrader `solution: true`; every code cell
    when a notebook lost its metadata), or None when the file cannot be read safely."""
    from grader.grading.intake import MAX_NOTEBOOK_BYTES
    from grader.core.notebook import NotebookError, read_notebook

    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_NOTEBOOK_BYTES:
            return None
        nb = read_notebook(path)
    except (OSError, NotebookError):
        return None
    code = [c for c in nb.cells if c.cell_type == "code"]
    marked = [c for c in code if (c.metadata.get("nbgrader") or {}).get("solution") is True]
    return "\n\n".join(c.source for c in (marked or code)) + "\n"


@dataclass
class _Fingerprint:
    """What copydetect's `compare_files` reads of a `CodeFingerprint` (same attributes)."""

    k: int
    filtered_code: str
    offsets: object  # numpy array: characters removed by the filter, for copydetect's slices
    hashes: set[int]
    hash_idx: dict[int, list[int]]
    token_coverage: float


def _kgram_hashes(doc: str, k: int):
    """A stable 63-bit hash of every k-gram. copydetect hashes with Python's `hash`, which
    changes with each process (PYTHONHASHSEED): the same class would give other percentages
    on every run."""
    import numpy as np

    return np.array(
        [
            int.from_bytes(hashlib.blake2b(doc[i : i + k].encode(), digest_size=8).digest()) >> 1
            for i in range(len(doc) - k + 1)
        ],
        dtype=np.int64,
    )


def _fingerprint(code: str, boilerplate: set[int] | frozenset[int] = frozenset()) -> _Fingerprint:
    """copydetect's fingerprint (Pygments tokens, names and literals folded, comments dropped;
    winnowed k-grams) with stable hashes; fingerprints in `boilerplate` are left out."""
    from copydetect.utils import filter_code, winnow

    filtered, offsets = filter_code(code, "cells.py", "python")
    hashes, idx = winnow(
        _kgram_hashes(filtered, NOISE_T), GUARANTEE_T - NOISE_T + 1, remove_duplicates=False
    )
    where: dict[int, list[int]] = defaultdict(list)
    for h, i in zip(hashes.tolist(), idx.tolist(), strict=True):
        if h not in boilerplate:
            where[h].append(i)
    return _with(_Fingerprint(NOISE_T, filtered, offsets, set(), {}, 0.0), dict(where))


def _with(fp: _Fingerprint, where: dict[int, list[int]]) -> _Fingerprint:
    """`fp` keeping only the fingerprints in `where` (positions by hash)."""
    from copydetect.utils import get_token_coverage

    coverage = float(get_token_coverage(where, fp.k, len(fp.filtered_code)))
    return _Fingerprint(fp.k, fp.filtered_code, fp.offsets, set(where), where, coverage)


def similar_pairs(
    sources: dict[str, str], boilerplate: str, assignment: str, threshold: float = THRESHOLD
) -> tuple[list[SimilarPair], dict[str, int]]:
    """Pairs of students whose graded code overlaps above `threshold` (module docstring)."""
    from copydetect.detector import compare_files

    base = set(_fingerprint(boilerplate).hashes) if boilerplate.strip() else set()
    first = {s: _fingerprint(code, base) for s, code in sources.items()}
    df: Counter[int] = Counter(h for fp in first.values() for h in set(fp.hashes))
    cut = max(COMMON_MIN, int(COMMON_FRACTION * len(sources)))
    common = {h for h, n in df.items() if n > cut}
    prints = {
        s: _with(fp, {h: i for h, i in fp.hash_idx.items() if h not in common})
        for s, fp in first.items()
    }
    index: dict[int, list[str]] = defaultdict(list)
    for s in sorted(prints):
        for h in set(prints[s].hashes):
            index[h].append(s)
    candidates: set[tuple[str, str]] = set()
    for students in index.values():
        for i, a in enumerate(students):
            for b in students[i + 1 :]:
                candidates.add((a, b))
    pairs = []
    for a, b in sorted(candidates):
        tokens, (sim_a, sim_b), _ = compare_files(prints[a], prints[b])
        if max(sim_a, sim_b) >= threshold:
            pairs.append(
                SimilarPair(
                    assignment, a, b, round(float(sim_a), 3), round(float(sim_b), 3), int(tokens)
                )
            )
    pairs.sort(key=lambda p: (-max(p.similarity_a, p.similarity_b), p.student_a, p.student_b))
    stats = {
        "submissions": len(sources),
        "common_fingerprints_dropped": len(common),
        "candidate_pairs": len(candidates),
        "all_pairs": len(sources) * (len(sources) - 1) // 2,
    }
    return pairs, stats


def _sources(
    results: dict[str, GradeResult], paths: dict[str, Path], aid: str
) -> tuple[dict[str, str], list[str]]:
    out: dict[str, str] = {}
    missing: list[str] = []
    for student, r in sorted(results.items()):
        a = next((x for x in r.assignments if x.id == aid), None)
        if a is None or not a.graded_file or student not in paths:
            continue
        rel = Path(a.graded_file)
        if rel.is_absolute() or ".." in rel.parts:
            missing.append(student)
            continue
        code = graded_cells(paths[student] / rel)
        if code is None:
            missing.append(student)
        else:
            out[student] = code
    return out, missing


# ----------------------------------------------------------------------------- build


def build(
    graded: Path,
    course: Course,
    submissions: dict[str, Path] | None = None,
    threshold: float = THRESHOLD,
) -> ClassReport:
    """Everything the report shows, as data."""
    t0, c0 = time.perf_counter(), time.process_time()
    results, notes = load_results(graded)
    paths = submissions if submissions is not None else submission_paths(graded)
    t1, c1 = time.perf_counter(), time.process_time()
    tests = pass_rates(results)
    late = late_rows(results, course)
    stats = assignment_stats(results, course)
    t2, c2 = time.perf_counter(), time.process_time()
    similar: list[SimilarPair] = []
    sim_info: dict[str, dict[str, int]] = {}
    for aid in course.assignment_ids:
        release = course.root / "exercises" / aid
        stub = next(
            (
                graded_cells(release / f"{aid}{s}")
                for s in (".py", ".ipynb")
                if (release / f"{aid}{s}").is_file()
            ),
            None,
        )
        sources, missing = _sources(results, paths, aid)
        pairs, info = similar_pairs(sources, stub or "", aid, threshold)
        if missing:
            info["unreadable"] = len(missing)
        sim_info[aid] = info
        similar += pairs
    if not paths:
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


# ----------------------------------------------------------------------------- outputs


def histogram_png(scores: Iterable[float], max_score: float) -> bytes:
    """Total scores in ten bins over 0..max (matplotlib, Agg: no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    values = list(scores)
    top = max_score or max(values, default=1.0) or 1.0
    fig = Figure(figsize=(6.4, 3.2), dpi=100)
    ax = fig.add_subplot()
    ax.hist(values, bins=10, range=(0, top), color="#4c72b0", edgecolor="white")
    ax.set_xlabel(f"total score (of {shown(top)})")
    ax.set_ylabel("students")
    ax.set_title(f"Score distribution ({len(values)} students)")
    ax.yaxis.get_major_locator().set_params(integer=True)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _rate(t: PassRate) -> str:
    return "–" if t.pass_rate is None else f"{100 * t.pass_rate:.0f}%"


def _md(text: object) -> str:
    from grader.reports.escape import md_inline

    return md_inline(str(text), MESSAGE_CHARS)


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
            f"| {_md(a.assignment)} | {shown(a.mean)} / {shown(a.max_score)} | {shown(a.median)} "
            f"| {shown(a.minimum)} | {shown(a.maximum)} | {a.errors} |"
        )
    out += [
        "",
        "## Tests, hardest first",
        "",
        "| assignment | test | pass rate | passed | failed | skipped | commonest failure |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for t in rep.tests:
        common = f"{_md(t.common_failure)} ({t.common_failure_count}x)" if t.common_failure else ""
        out.append(
            f"| {_md(t.assignment)} | {_md(t.name)} | {_rate(t)} | {t.passed} | {t.failed} "
            f"| {t.skipped} | {common} |"
        )
    out += ["", "## Late submissions", ""]
    if rep.late:
        out += [
            "| student | assignment | submitted | due | hours late | penalty |",
            "|---|---|---|---|---:|---:|",
        ]
        for x in rep.late:
            hours = "–" if x.hours_late is None else f"{x.hours_late:g}"
            out.append(
                f"| {_md(x.student)} | {_md(x.assignment)} | {_md(x.submitted or '–')} "
                f"| {_md(x.due)} | {hours} | {100 * x.penalty:.0f}% |"
            )
    else:
        out.append("None.")
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
.lead{font-size:110%}details summary{cursor:pointer;margin:.5em 0}
"""
HARDEST_SHOWN = 15  # tests in the page's first table; the rest fold away


def _e(text: object) -> str:
    return _html.escape(str(text), quote=True)


def html(rep: ClassReport) -> str:
    rows = []
    p = rows.append
    p("<!doctype html><html lang=en><head><meta charset=utf-8>")
    p("<meta name=viewport content='width=device-width,initial-scale=1'>")
    p(f"<title>Class report: {_e(rep.course)}</title><style>{_CSS}</style></head><body>")
    p(f"<h1>Class report: {_e(rep.course)}</h1>")
    mean = statistics.fmean(rep.scores.values()) if rep.scores else 0.0
    p(
        f"<p class=lead>{rep.students} students graded &middot; mean "
        f"{_e(fraction(mean, rep.max_score))} &middot; {len(rep.late)} late &middot; "
        f"{len(rep.similar)} similar pairs to look at</p>"
        f"<p><small>generated {_e(rep.generated)}</small></p>"
    )
    p("<img src='scores.png' alt='histogram of total scores' width=640 height=320>")
    p(
        "<h2>Scores</h2><table><tr><th>assignment<th>mean<th>median<th>min<th>max"
        "<th>could not be graded</tr>"
    )
    for a in rep.assignments:
        p(
            f"<tr><td>{_e(a.assignment)}<td class=n>{_e(fraction(a.mean, a.max_score))}"
            f"<td class=n>{_e(shown(a.median))}<td class=n>{_e(shown(a.minimum))}"
            f"<td class=n>{_e(shown(a.maximum))}<td class=n>{a.errors}</tr>"
        )
    head = (
        "<table class=tests><colgroup><col style='width:11%'><col style='width:30%'>"
        "<col style='width:12%'><col style='width:6%'><col style='width:6%'>"
        "<col style='width:7%'><col style='width:28%'></colgroup>"
        "<tr><th>assignment<th>test<th>pass rate<th>passed<th>failed<th>skipped"
        "<th>commonest failure</tr>"
    )
    p(f"</table><h2>Tests, hardest first</h2>{head}")
    for n, t in enumerate(rep.tests):
        if n == HARDEST_SHOWN:
            p(f"</table><details><summary>all {len(rep.tests)} tests</summary>{head}")
        width = 0 if t.pass_rate is None else round(60 * t.pass_rate)
        ok = " ok" if (t.pass_rate or 0) >= 0.8 else ""
        common = (
            f"<code>{_e(t.common_failure)}</code> <small>({t.common_failure_count}&times;)</small>"
            if t.common_failure
            else ""
        )
        p(
            f"<tr><td>{_e(t.assignment)}<td>{_e(t.name)}<td class=n>"
            f"<span class='bar{ok}' style='width:{width}px'></span>{_e(_rate(t))}"
            f"<td class=n>{t.passed}<td class=n>{t.failed}<td class=n>{t.skipped}<td>{common}</tr>"
        )
    if len(rep.tests) > HARDEST_SHOWN:
        p("</table></details><table>")
    p("</table><h2>Late submissions</h2>")
    if rep.late:
        p("<table><tr><th>student<th>assignment<th>submitted<th>due<th>hours late<th>penalty</tr>")
        for x in rep.late:
            hours = "–" if x.hours_late is None else f"{x.hours_late:g}"
            p(
                f"<tr><td>{_e(x.student)}<td>{_e(x.assignment)}<td>{_e(x.submitted or '–')}"
                f"<td>{_e(x.due)}<td class=n>{_e(hours)}<td class=n>{100 * x.penalty:.0f}%</tr>"
            )
        p("</table>")
    else:
        p("<p>None.</p>")
    p("<h2>Similar graded cells <small>(for you to look at; not a verdict)</small></h2>")
    p(f"<p class=caveat>{_e(SIMILARITY_CAVEAT)}</p>")
    if rep.similar:
        p(
            "<table><tr><th>assignment<th>student<th>student<th>share of each one's code"
            "<th>tokens</tr>"
        )
        for s in rep.similar[:MAX_PAIRS_SHOWN]:
            p(
                f"<tr><td>{_e(s.assignment)}<td>{_e(s.student_a)}<td>{_e(s.student_b)}"
                f"<td class=n>{100 * s.similarity_a:.0f}% / {100 * s.similarity_b:.0f}%"
                f"<td class=n>{s.tokens}</tr>"
            )
        p("</table>")
        if len(rep.similar) > MAX_PAIRS_SHOWN:
            p(f"<p>... and {len(rep.similar) - MAX_PAIRS_SHOWN} more in class-report.json</p>")
    else:
        p(f"<p>No pair above {100 * rep.threshold:.0f}%.</p>")
    if rep.notes:
        p("<h2>Notes</h2><ul>" + "".join(f"<li>{_e(n)}" for n in rep.notes) + "</ul>")
    p("</body></html>")
    return "\n".join(rows) + "\n"


def terminal_summary(rep: ClassReport, hardest: int = 10) -> str:
    """A few plain-text tables for the terminal (the page and summary.md have everything)."""
    from grader.core.tables import format_table

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
    out: Path | None = None,
    submissions: dict[str, Path] | None = None,
    threshold: float | None = None,
) -> tuple[ClassReport, dict[str, Path]]:
    """Build the report over the graded batch in `graded` and write it (default
    `graded/class-report/`); returns the report and the paths written."""
    graded = Path(graded)
    if not graded.is_dir():
        raise ValueError(f"{graded}: not a folder; give the --out folder of `grader grade-all`")
    rep = build(graded, course, submissions, THRESHOLD if threshold is None else threshold)
    if rep.students == 0:
        raise ValueError(f"{graded}: no <student>/result.json found; run `grader grade-all` first")
    folder = Path(out) if out is not None else graded / REPORT_DIR
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
