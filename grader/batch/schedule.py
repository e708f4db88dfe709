"""`grade_all`: grade a whole class in parallel, crash-proof, resumable, shardable.

The loop: discover the submissions (`grader.batch.inputs`), keep each earlier grade that still
stands, and grade the rest in child processes (`grader.batch.children`), `jobs` at a time, each
killed after `timeout_s`. Only the parent writes: reports (`out_dir/<student>/result.json`,
`report.md`, `report.html`), the gradebook (`out_dir/gradebook.db`, under a file lock so that
shards sharing a folder are safe) and `out_dir/state.jsonl` (`grader.batch.state`), whose line for
a student is appended after the reports and the gradebook row: the commit point. A rerun regrades
what is stale, per assignment (`regrade_plan`: a changed suite regrades its assignment alone and
merges it into the student's earlier result), and the summary says why and what changed in each
regraded assignment's score (before -> after); `force=True` (`--force`) regrades everyone. A
listing without times keeps each earlier submission time for unchanged work (`kept_times`). The
gradebook write replaces rows, so an interruption at any point neither loses nor duplicates
grades. Skipped students' results are re-recorded into the gradebook (cheap and idempotent), so a
deleted or fresh gradebook.db is rebuilt complete. Every result, graded or kept, gets
the staff's data of the run (`finalize`: extensions in the late policy, then overrides), so an
override survives every regrade and a new one needs no regrade. At the end of a run the state
file is compacted to one line per student. Whatever fails for one submission (its grading, its
reports, its gradebook row) is that submission's error row, never the batch's end.
"""

from __future__ import annotations

import functools
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path
from typing import IO, Any

from grader.batch.audit import audit
from grader.batch.children import (
    CHILD_RESULT,
    Collected,
    GradeOne,
    Running,
    cause,
    collect,
    error_result,
    exit_on_termination,
    run_child,
    stacks_every,
)
from grader.batch.children import context as children_context
from grader.batch.inputs import (
    RegradePlan,
    discover,
    grading_inputs,
    kept_times,
    regrade_plan,
    resume_key,
    select_shard,
    submission_times,
)
from grader.batch.state import STATE, StateFile
from grader.core import points as pts
from grader.core.course import Course, load_course
from grader.core.errors import UsageError
from grader.core.jsonread import metrics_or_none
from grader.core.results import GradeResult, validate
from grader.core.staff import Staff
from grader.core.tables import format_table, points, score
from grader.gradebook import export_csv, record
from grader.grading.finalize import finalize
from grader.reports import write_reports


@dataclass
class BatchOutcome:
    """What one grade-all run did: every student's result, and who was graded, kept, failed."""

    results: dict[str, GradeResult] = field(default_factory=dict)
    graded: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    csv: Path | None = None
    gradebook: Path | None = None
    seconds: float = 0.0
    audit: list[str] = field(default_factory=list)  # points identities broken (batch.audit)


Regraded = dict[str, tuple[str, dict[str, float | None]]]


def _changes(r: GradeResult, before: dict[str, float | None]) -> str:
    """`<assignment> 34 -> 36` for each assignment regraded in this run."""
    after = {a.id: a.score for a in r.assignments}
    return "; ".join(
        f"{a} {'–' if old is None else score(old)} -> {score(after[a]) if a in after else '–'}"
        for a, old in before.items()
    )


def summary_table(
    results: dict[str, GradeResult],
    course: Course,
    failed: list[str],
    regraded: Regraded | None = None,
) -> str:
    """The class table; `regraded` maps a student graded in this run to (why, {assignment
    regraded: its score before})."""
    ids = course.assignment_ids
    regraded = regraded or {}
    rows = []
    for student in sorted(results):
        r = results[student]
        by_id = {a.id: a for a in r.assignments}
        why, before = regraded.get(student, ("", {}))
        rows.append(
            [student]
            + [points(by_id[i].score, by_id[i].max_score) if i in by_id else "-" for i in ids]
            + [
                points(r.score, r.max_score),
                "yes" if student in regraded else "no",
                why,
                _changes(r, before) if student in regraded else "",
                "ERROR" if student in failed else "",
            ]
        )
    text = format_table(
        ["student", *ids, "total", "regraded", "why", "before -> after", "note"], rows
    )
    scores = [r.score for r in results.values()]
    if scores:
        text += (
            f"\n\n{len(scores)} students; mean {round(statistics.fmean(scores), 2)}, "
            f"median {round(statistics.median(scores), 2)}, min {score(min(scores))}, "
            f"max {score(max(scores))}"
        )
    return text


def merge_kept(
    new: GradeResult, earlier: GradeResult, regraded: tuple[str, ...], order: list[str]
) -> GradeResult:
    """This run's grades of `regraded` over the earlier result's other assignments."""
    kept = [a for a in earlier.assignments if a.id not in regraded]
    by_id = {a.id: a for a in kept} | {a.id: a for a in new.assignments if a.id in regraded}
    new.assignments = [by_id[a] for a in order if a in by_id]
    new.score = pts.total(a.score for a in new.assignments)
    new.max_score = pts.total(a.max_score for a in new.assignments)
    if kept:
        new.warnings.append(
            "kept from the previous grading (its suites, reference and the grader are "
            "unchanged): " + ", ".join(a.id for a in kept)
        )
    return new


@dataclass
class _Run:
    """One grade-all run's shared state: where it writes, what it grades with, what it did.

    `plan` keeps or queues each student, `finish` commits one graded student (reports,
    gradebook row, state line), `close` compacts the state and prints the summary.
    """

    course: Course
    out: Path
    found: dict[str, Path]
    times: dict[str, str]
    inputs: dict[str, dict[str, str]]
    state: StateFile
    reference: dict | None
    progress: IO[str]
    total: int
    outcome: BatchOutcome
    staff: Staff = field(default_factory=Staff)
    regraded: Regraded = field(default_factory=dict)
    plans: dict[str, tuple[str, ...]] = field(default_factory=dict)  # partial regrades
    earlier: dict[str, GradeResult] = field(default_factory=dict)  # their kept results
    counter: int = 0

    @property
    def db(self) -> Path:
        return self.out / "gradebook.db"

    def line(self, student: str, r: GradeResult, note: str) -> None:
        """`[3/40] ada 70 / 130 12.3s`: one progress line per student, kept or graded."""
        self.counter += 1
        shown = points(r.score, r.max_score)
        print(f"[{self.counter}/{self.total}] {student} {shown} {note}", file=self.progress)
        self.progress.flush()

    def previous(self, student: str) -> GradeResult | None:
        """The student's earlier result.json, or None when it is missing or off-schema."""
        try:
            r = GradeResult.read(self.out / student / "result.json")
            validate(r.to_dict())
        except (OSError, ValueError, TypeError, KeyError):
            return None
        return r

    def plan(
        self, selected: list[str], done: dict[str, dict], force: bool
    ) -> list[tuple[str, str]]:
        """Keep each student whose grade still stands (re-recorded into the gradebook) and
        return the others as (student, resume key), each with why and its scores before."""
        todo: list[tuple[str, str]] = []
        for student in selected:
            digest = resume_key(self.found[student], self.times.get(student))
            prev = done.get(student)
            plan = regrade_plan(prev, digest, self.inputs, force)
            r = self.previous(student) if (not plan.why or plan.partial) else None
            if r is None and (not plan.why or plan.partial):
                missing = not (self.out / student / "result.json").is_file()
                why = "result.json missing" if missing else "result.json unreadable"
                plan = RegradePlan(
                    why if not plan.why else f"{plan.why}; {why}", tuple(self.inputs)
                )
            if not plan.why and r is not None:
                self.refinalize(student, r)
                record(self.db, r, self.course)  # idempotent: keeps the gradebook complete
                self.outcome.results[student] = r
                self.outcome.skipped.append(student)
                self.line(student, r, "(unchanged, skipped)")
                continue
            scores = {a.id: a.score for a in r.assignments} if r is not None else {}
            if prev is not None and prev.get("status") == "ok" and r is None:
                r_scores: Any = prev.get("scores") if isinstance(prev.get("scores"), dict) else {}
                scores = {k: v for k, v in r_scores.items() if isinstance(v, (int, float))}
            self.regraded[student] = (plan.why, {a: scores.get(a) for a in plan.assignments})
            if plan.partial and r is not None:
                self.plans[student] = plan.assignments
                self.earlier[student] = r
            todo.append((student, digest))
        return todo

    def refinalize(self, student: str, r: GradeResult) -> None:
        """A kept result with the staff's data of today (an extension or an override may have
        changed since it was graded): recomputed from its tests' graded scores, and its reports
        rewritten when that changed anything."""
        before = r.to_json()
        finalize(r, self.course, self.staff)
        if r.to_json() != before:
            metrics = metrics_or_none(self.found[student] / "metrics.json")
            write_reports(r, self.course, self.out / student, metrics, self.reference)

    def finish(
        self, student: str, digest: str, result: GradeResult, seconds: float, ok: bool
    ) -> None:
        """Commit one graded student: reports, gradebook row, then its state line (the commit
        point). Whatever fails here is this submission's error row, never the batch's end."""
        course, work = self.course, self.out / student
        if ok and student in self.plans:
            result = merge_kept(
                result, self.earlier[student], self.plans[student], course.assignment_ids
            )
        try:
            if ok:  # the late policy with the student's extensions, then the overrides
                finalize(result, course, self.staff)
            metrics = metrics_or_none(self.found[student] / "metrics.json") if ok else None
            write_reports(result, course, work, metrics, self.reference)
        except Exception as exc:  # off-schema result, or a report that cannot be written
            ok = False
            result = error_result(student, course, cause("writing its reports failed", exc), digest)
            try:
                write_reports(result, course, work, None, self.reference)
            except Exception as again:
                result.warnings.append(cause("its error report could not be written", again))
        try:
            record(self.db, result, course)
        except Exception as exc:
            ok = False
            result.warnings.append(cause("its gradebook row could not be written", exc))
        self.state.append(
            {
                "student": student,
                "digest": digest,
                "submission": str(Path(self.found[student]).resolve()),
                "inputs": self.inputs,
                "submitted_at": self.times.get(student),
                "score": result.score,
                "scores": {a.id: a.score for a in result.assignments},
                "max_score": result.max_score,
                "status": "ok" if ok else "error",
                "seconds": round(seconds, 3),
                "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
        )
        self.outcome.results[student] = result
        (self.outcome.graded if ok else self.outcome.failed).append(student)
        note = f"{seconds:.1f}s" + ("" if ok else f" ERROR: {result.warnings[-1][:200]}")
        self.line(student, result, note)

    def start(
        self, ctx: Any, grade_one: GradeOne, student: str, digest: str, timeout: float
    ) -> Running:
        """One student's child process, started: its old result moved aside, its trusted time
        and (for a partial regrade) its stale assignments bound into `grade_one`; it is killed
        after `timeout` s, and leaves its threads' stacks in grade.log before (`stacks_every`)."""
        work = self.out / student
        work.mkdir(parents=True, exist_ok=True)
        (work / CHILD_RESULT).unlink(missing_ok=True)
        # stale until the child's lands; kept for the class report's "changed" list
        if (work / "result.json").is_file():
            os.replace(work / "result.json", work / "result.previous.json")
        one: Callable[..., Any] = grade_one
        if student in self.times:
            one = functools.partial(one, timestamp=self.times[student])
        if student in self.plans:
            one = functools.partial(one, assignments=list(self.plans[student]))
        where = (str(self.found[student]), student, str(work), digest)
        p = ctx.Process(
            target=run_child,
            args=(one, *where, os.getpid(), stacks_every(timeout)),
            name=f"grade-{student}",
            daemon=False,
        )
        p.start()
        return Running(student, p, time.monotonic(), digest)

    def close(self, started: float, summary: IO[str]) -> BatchOutcome:
        """Compact the state file, export grades.csv, audit the points, print the summary."""
        outcome = self.outcome
        self.state.compact()
        for names in (outcome.graded, outcome.skipped, outcome.failed):
            names.sort()
        if self.db.exists():
            outcome.csv = export_csv(self.db, self.out / "grades.csv", outcome.results)
        outcome.audit = audit(self.out, self.staff)
        outcome.seconds = time.perf_counter() - started
        table = summary_table(outcome.results, self.course, outcome.failed, self.regraded)
        print(table, file=summary)
        for problem in outcome.audit:
            print(f"points audit (the grader's bug, not a student's): {problem}", file=summary)
        print(
            f"graded {len(outcome.graded)}, unchanged {len(outcome.skipped)}, failed "
            f"{len(outcome.failed)} in {outcome.seconds:.1f} s; results in {self.out}",
            file=summary,
        )
        return outcome


def _open_run(
    submissions: Path,
    out: Path,
    shard: tuple[int, int] | None,
    course: Course,
    reference: dict | None,
    drop_times: bool,
    progress: IO[str],
    staff: Staff,
) -> tuple[_Run, list[str], dict[str, dict]]:
    """The run over this shard's submissions, with what the state file says was done."""
    out.mkdir(parents=True, exist_ok=True)
    found = discover(submissions, exclude=out)
    # an extension or override for a student the class does not hold is a typo: say so first
    staff.check_students(found, f"the class listing {submissions}")
    selected = select_shard(list(found), shard)
    state = StateFile(out / STATE)
    done = state.read()
    times, kept = kept_times(
        {s: found[s] for s in selected}, submission_times(submissions), done, drop_times
    )
    if kept:
        print(
            f"kept the submission time of the previous grading (the listing gives none and the "
            f"work is unchanged) for: {', '.join(kept)}",
            file=progress,
        )
    run = _Run(
        course=course,
        out=out,
        found=found,
        times=times,
        inputs=grading_inputs(course.root, course.assignment_ids),
        state=state,
        reference=reference,
        progress=progress,
        total=len(selected),
        outcome=BatchOutcome(gradebook=out / "gradebook.db"),
        staff=staff,
    )
    return run, selected, done


def _grade_children(
    run: _Run, todo: list[tuple[str, str]], grade_one: GradeOne, jobs: int, timeout: float
) -> None:
    """Grade `todo` in child processes (`grader.batch.children.context`), `jobs` at a time, each
    killed after `timeout` s. The children that ended are collected, their slots given to the
    next students, and only then committed by `run.finish` (reports, gradebook row, state
    line): a slow commit keeps no slot idle. Interrupted, no child outlives the run."""
    queue = list(todo)
    running: dict[Any, Running] = {}
    restore = exit_on_termination()
    with children_context() as ctx:

        def fill() -> None:
            while queue and len(running) < jobs:
                student, digest = queue.pop(0)
                job = run.start(ctx, grade_one, student, digest, timeout)
                running[job.process.sentinel] = job

        try:
            fill()
            while running:
                ended = _ended(run, running, wait(list(running), timeout=0.5), timeout)
                fill()
                for job, got in ended:
                    run.finish(job.student, job.digest, got.result, got.seconds, got.ok)
        finally:
            for job in running.values():  # interrupted: leave no orphan graders behind
                job.process.kill()
                job.process.join()
            restore()


def _ended(
    run: _Run, running: dict[Any, Running], ready: list[Any], timeout: float
) -> list[tuple[Running, Collected]]:
    """Collect every child that ended, and kill (then collect) every one past `timeout`; each
    leaves `running`."""
    now = time.monotonic()
    ended = []
    for key in list(running):
        job = running[key]
        timed_out = key not in ready and now - job.started > timeout
        if key not in ready and not timed_out:
            continue
        if timed_out:
            job.process.kill()
        job.process.join()
        del running[key]
        work = run.out / job.student
        ended.append((job, collect(job, work, run.course, timed_out, timeout, now)))
    return ended


def grade_all(
    submissions: Path,
    out_dir: Path,
    jobs: int = 1,
    shard: tuple[int, int] | None = None,
    grade_one: GradeOne | None = None,
    *,
    course: Course | None = None,
    reference: dict | None = None,
    timeout_s: float | None = None,
    force: bool = False,
    drop_times: bool = False,
    progress: IO[str] | None = None,
    summary: IO[str] | None = None,
    staff: Staff | None = None,
) -> BatchOutcome:
    """Grade every submission (of this shard) and write reports, gradebook.db and grades.csv.

    `grade_one(submission, student, work_dir) -> GradeResult` runs in a child process per
    submission (`grader.batch.children`). `timeout_s` (default: the course's submission timeout
    + 120 s) kills a grading that hangs. `force` regrades submissions even when unchanged.
    `drop_times` grades changed work that the listing gives no time for without one (otherwise
    that is refused: `inputs.DroppedTimes`, before anything is graded). `staff`: the staff's
    data (grader.core.staff), checked against the class before anything is graded and applied
    to every result, graded or kept (`grader.grading.finalize`).

    The steps: open the run (`_open_run`), keep or queue each student (`_Run.plan`), grade the
    queue in children (`_grade_children`, each committed by `_Run.finish`), close the run
    (`_Run.close`).
    """
    if grade_one is None:
        raise ValueError("grade_one is required (e.g. functools.partial(grade_entry, root=...))")
    if jobs < 1:
        raise UsageError(f"--jobs {jobs}: must be 1 or more")
    course = course or load_course()
    progress = progress if progress is not None else sys.stderr
    summary = summary if summary is not None else sys.stdout
    # every group of assignments with limits of their own has a time budget of its own
    timeout = timeout_s if timeout_s is not None else course.submission_seconds() + 120
    started = time.perf_counter()
    run, selected, done = _open_run(
        Path(submissions), Path(out_dir), shard, course, reference, drop_times, progress,
        staff or Staff(),
    )  # fmt: skip
    todo = run.plan(selected, done, force)
    _grade_children(run, todo, grade_one, jobs, timeout)
    return run.close(started, summary)
